//! What a QE executes: the seam between TTPv2's one Fig. 5 sequence
//! ([`super::qe`]: images, time reads, exit records, App. B sets, every
//! process classified) and the things ttp measures with it. A target says
//! who plays which role in the QE (Sec. 4) and runs once between the two
//! time reads; the sequence around it is the same for every target. A new
//! target is one `impl Target`, not a copy of a command's measurement.
//!
//! Targets today: a command held before `execve` ([`HeldCommand`], `run`,
//! `run --protocol emp`, `calibrate`) and a statement a PostgreSQL backend
//! executes (`pg::qc`, `run --postgres`). What runs beside a command for
//! the whole QE (`run --blame`) plugs in through [`BesideQe`].
use std::{process::Command, time::Duration};

use crate::window::{
    context::{QeContext, QeError, QeOutcome, Roles, RunningBeside},
    qe::measure_with,
};
use ttp_ledger::probe::ProbeError;
use ttp_sys::sys::spawn::{HeldChild, RunningChild, SpawnError};

/// One execution of something measured as a QE.
pub trait Target {
    /// What one execution returns beside the measurement (how it ended).
    type Ran;
    /// Who plays which role in the QE, known before it starts.
    fn roles(&self) -> Roles;
    /// The execution between the two time reads (once: it consumes the
    /// target).
    fn execute(self) -> Self::Ran;
}

/// Measures one execution of `target` in Fig. 5 order (steps 3–15) and
/// returns what it returned; the caller records how it ended.
pub fn measure_target<T: Target>(
    ctx: &mut QeContext<'_>,
    qe: u32,
    plan: Option<String>,
    target: T,
) -> Result<(QeOutcome, T::Ran), ProbeError> {
    let roles = target.roles();
    measure_with(ctx, qe, plan, roles, move || target.execute())
}

/// Runs `cmd` once and measures it. A command that cannot be started is
/// recorded (spawn_error, counted by X1) and reported as the error too.
pub fn measure(
    ctx: &mut QeContext<'_>,
    qe: u32,
    cmd: Command,
    plan: Option<String>,
) -> Result<QeOutcome, QeError> {
    let held = HeldChild::spawn(cmd, ctx.run_as.clone())?;
    if let Some(rec) = ctx.recorder.as_deref_mut() {
        rec.follow(ctx.ledger, held.pid()).map_err(QeError::Trace)?;
    }
    let blame = match ctx.beside {
        Some(b) => Some(b.start(held.pid()).map_err(QeError::Blame)?),
        None => None,
    };
    let timeout = ctx.timeout;
    let (mut out, ran) = measure_target(ctx, qe, plan, HeldCommand { held, timeout })?;
    let (child, timed_out) = ran?;
    // Reaped only now, after the per-process after-image.
    let exit = child.wait()?.status;
    let rec = &mut out.record;
    rec.timed_out = Some(timed_out);
    rec.query_is_tree = Some(!ctx.query_by_name);
    use std::os::unix::process::ExitStatusExt;
    rec.exit_code = exit.code();
    rec.signal = exit.signal();
    match blame.map(RunningBeside::finish) {
        Some(Ok(summary)) => rec.blame = Some(summary),
        Some(Err(e)) => rec.blame_error = Some(e),
        None => {}
    }
    Ok(out)
}

/// A command held before `execve` (sys/spawn.rs): its process tree is the
/// query (Sec. 7.2). `execute` releases it and waits for its exit without
/// reaping it, so the query process stays in /proc as a zombie and the
/// after-image reads its final counters (Fig. 5); it is reaped after the
/// per-process after-image, by the caller.
pub(crate) struct HeldCommand {
    pub held: HeldChild,
    pub timeout: Option<Duration>,
}

impl Target for HeldCommand {
    /// The running (exited, unreaped) child and whether it hit the timeout.
    type Ran = Result<(RunningChild, bool), SpawnError>;

    fn roles(&self) -> Roles {
        Roles::CommandTree {
            root: self.held.pid(),
        }
    }

    fn execute(self) -> Self::Ran {
        let child = self.held.release()?;
        let timed_out = wait_exited(child.pid(), self.timeout);
        Ok((child, timed_out))
    }
}

/// Blocks until process `pid` (our child) has exited, leaving it
/// unreaped; kills it after `timeout`. Returns whether it was killed.
fn wait_exited(pid: u32, timeout: Option<Duration>) -> bool {
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let fired = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = timeout.map(|t| {
        let fired = fired.clone();
        std::thread::spawn(move || {
            if done_rx.recv_timeout(t).is_err() {
                fired.store(true, std::sync::atomic::Ordering::SeqCst);
                // SAFETY: our own child, not reaped until this thread ends.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        })
    });
    loop {
        // SAFETY: zeroed siginfo is a valid out-parameter.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child with a valid pointer.
        let r = unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    let _ = done_tx.send(());
    if let Some(w) = watchdog {
        let _ = w.join();
    }
    fired.load(std::sync::atomic::Ordering::SeqCst)
}
