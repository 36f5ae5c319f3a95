//! One attempt at a QE of a command (`ttp-ebpf run -- CMD`) in the order of
//! Fig. 5 and Sec. 3.1: the plan, then `--prepare`, the cache clearing
//! last, right before the QE. The attempt says whether its plan differs
//! from QE 1's or it failed for a reason of the moment; the one Q@C
//! procedure (`ttp_ttpv2::procedure::next_qe`, Sec. 3.2.3) restarts,
//! retries and pauses. What counts as transient for a command is in
//! docs/run.md ("Transient failures").
use std::{io, process::Command};

use anyhow::Context;

use super::plan::{Plan, QcSpec};
use ttp_sys::sys::spawn::{HeldChild, RunAs, SpawnError};
use ttp_ttpv2::procedure::{self, Attempt};
use ttp_window::window::{
    context::{QeContext, QeError, QeOutcome},
    target,
};

/// One attempt's QE: measured, or a failure of the ledger or of the start.
pub(super) type Ran = Result<QeOutcome, QeError>;

/// A `--plan-cmd` or `--prepare` that did not succeed.
#[derive(Debug, thiserror::Error)]
enum ShellError {
    #[error(transparent)]
    Start(#[from] SpawnError),
    #[error("reading its output: {0}")]
    Output(#[from] io::Error),
    #[error("`{cmd}` failed: {status}")]
    Exit {
        cmd: String,
        status: std::process::ExitStatus,
    },
}

/// Runs `sh -c cmd` as `run_as` and returns its stdout.
fn shell(cmd: &str, run_as: &RunAs) -> Result<String, ShellError> {
    let mut c = Command::new("sh");
    c.arg("-c").arg(cmd).stdout(std::process::Stdio::piped());
    let mut child = HeldChild::spawn(c, run_as.clone())?.release()?;
    let mut out = String::new();
    if let Some(mut so) = child.take_stdout() {
        use std::io::Read;
        so.read_to_string(&mut out)?;
    }
    let exit = child.wait()?;
    if !exit.status.success() {
        return Err(ShellError::Exit {
            cmd: cmd.to_string(),
            status: exit.status,
        });
    }
    Ok(out)
}

/// A start that failed for a reason of the moment (no process slot, memory,
/// file descriptors, the executable being written), not one the user must
/// fix (not found, not executable, bad format).
fn transient_start(e: &SpawnError) -> bool {
    match e {
        SpawnError::Setup { .. } => true,
        SpawnError::Exec { source, .. } => {
            matches!(
                source.kind(),
                io::ErrorKind::ResourceBusy
                    | io::ErrorKind::OutOfMemory
                    | io::ErrorKind::WouldBlock
                    | io::ErrorKind::Interrupted
            ) || matches!(
                source.raw_os_error(),
                Some(libc::EAGAIN | libc::ENOMEM | libc::ETXTBSY)
            )
        }
        _ => false,
    }
}

fn transient_shell(e: &ShellError, codes: &[i32]) -> bool {
    match e {
        ShellError::Start(s) => transient_start(s),
        ShellError::Exit { status, .. } => status.code().is_some_and(|c| codes.contains(&c)),
        ShellError::Output(_) => false,
    }
}

/// The QEs of a command's Q@C, for
/// [`ttp_ttpv2::procedure::next_qe`].
pub(super) struct CommandAttempts<'c, 'x> {
    pub ctx: &'c mut QeContext<'x>,
    pub plan: &'c Plan,
    pub spec: &'c QcSpec,
}

impl procedure::Attempts for CommandAttempts<'_, '_> {
    type Out = Ran;
    type Error = anyhow::Error;

    fn attempt(&mut self, i: u32, first_plan: Option<&str>) -> anyhow::Result<Attempt<Ran>> {
        one_qe(self.ctx, self.plan, self.spec, i, first_plan)
    }
}

/// One attempt at QE `i` of Q@C `spec` (Fig. 5 and Sec. 3.1: the plan, then
/// the preparation, and the cache clearing last, right before the QE).
fn one_qe(
    ctx: &mut QeContext<'_>,
    plan: &Plan,
    spec: &QcSpec,
    i: u32,
    first_plan: Option<&str>,
) -> anyhow::Result<Attempt<Ran>> {
    let codes = &plan.transient_exit;
    let plan_text = match &spec.plan_cmd {
        Some(p) => match shell(p, &plan.run_as) {
            Ok(t) => Some(t),
            Err(e) if transient_shell(&e, codes) => {
                return Ok(Attempt::Transient {
                    what: format!("--plan-cmd: {e}"),
                    ran: None,
                });
            }
            Err(e) => return Err(e).context("--plan-cmd"),
        },
        None => None,
    };
    if let (Some(a), Some(b)) = (first_plan, &plan_text)
        && a != b
    {
        return Ok(Attempt::PlanChanged(b.clone()));
    }
    if let Some(p) = &spec.prepare {
        match shell(p, &plan.run_as) {
            Ok(_) => {}
            Err(e) if transient_shell(&e, codes) => {
                return Ok(Attempt::Transient {
                    what: format!("--prepare: {e}"),
                    ran: None,
                });
            }
            Err(e) => return Err(e).context("--prepare"),
        }
    }
    let cold = match &plan.cold_cache {
        Some(c) => Some(
            c.before_qe(ctx.ledger)
                .context("dropping the page cache (needs root)")?,
        ),
        None => None,
    };
    let mut cmd = Command::new(&spec.argv[0]);
    cmd.args(&spec.argv[1..]);
    if !plan.show_output {
        cmd.stdout(std::process::Stdio::null());
    }
    if let Some(pin) = plan.pin.clone() {
        use std::os::unix::process::CommandExt;
        // SAFETY: pin_self only calls sched_setaffinity on a set on the
        // stack: no allocation or lock between fork and exec.
        unsafe { cmd.pre_exec(move || pin.pin_self()) };
    }
    let mut out = target::measure(ctx, i, cmd, plan_text);
    if let Ok(o) = &mut out {
        o.record.cold_cache = cold;
    }
    Ok(match out {
        Ok(o) if o.record.exit_code.is_some_and(|c| codes.contains(&c)) => Attempt::Transient {
            what: format!(
                "exit status {} (--transient-exit)",
                o.record.exit_code.unwrap_or_default()
            ),
            ran: Some(Ok(o)),
        },
        Err(QeError::Spawn(e)) if transient_start(&e) => Attempt::Transient {
            what: e.to_string(),
            ran: Some(Err(QeError::Spawn(e))),
        },
        other => Attempt::Ran(other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a failure the user must fix (command not found, not
    /// executable) retried for minutes, and a machine failure of the moment
    /// (fork's EAGAIN, ETXTBSY) not retried; exit statuses only when listed.
    #[test]
    fn which_failures_are_transient() {
        let exec = |errno| SpawnError::Exec {
            program: "q".into(),
            source: io::Error::from_raw_os_error(errno),
        };
        assert!(transient_start(&exec(libc::EAGAIN)));
        assert!(transient_start(&exec(libc::ETXTBSY)));
        assert!(transient_start(&exec(libc::ENOMEM)));
        assert!(!transient_start(&exec(libc::ENOENT)));
        assert!(!transient_start(&exec(libc::EACCES)));
        assert!(!transient_start(&exec(libc::ENOEXEC)));
        assert!(!transient_start(&SpawnError::NotFound {
            program: "q".into()
        }));
        use std::os::unix::process::ExitStatusExt;
        let exit = |code: i32| ShellError::Exit {
            cmd: "x".into(),
            status: std::process::ExitStatus::from_raw(code << 8),
        };
        assert!(transient_shell(&exit(75), &[75]));
        assert!(!transient_shell(&exit(1), &[75]));
        assert!(!transient_shell(&exit(75), &[]));
    }
}
