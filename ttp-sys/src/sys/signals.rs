//! Ctrl-C and SIGTERM end a measurement cleanly: the handlers only set a
//! flag that measurement loops poll, so every guard (attached programs,
//! sysctls, children) is dropped on the normal path and results are written.
use std::sync::{
    Arc, OnceLock,
    atomic::{AtomicBool, Ordering},
};

/// The flag the handlers raise, once installed: one per process, so that
/// every part of a command that asks for it polls the same flag.
static INSTALLED: OnceLock<StopFlag> = OnceLock::new();

/// `Default` is a flag no signal raises (no handler installed).
#[derive(Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// Installs SIGINT/SIGTERM/SIGHUP handlers that raise the flag. A second
    /// signal while the flag is raised terminates at once (the default action
    /// is restored by signal-hook's conditional shutdown). Installing again
    /// returns the flag already installed.
    pub fn install() -> std::io::Result<Self> {
        if let Some(flag) = INSTALLED.get() {
            return Ok(flag.clone());
        }
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
        ] {
            signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&flag))?;
            signal_hook::flag::register(sig, Arc::clone(&flag))?;
        }
        Ok(INSTALLED.get_or_init(|| Self(flag)).clone())
    }

    pub fn raised(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// The flag itself, for loops that poll an `AtomicBool`.
    pub fn as_atomic(&self) -> &AtomicBool {
        &self.0
    }

    /// Sleeps up to `d`, waking early when the flag is raised.
    pub fn sleep(&self, d: std::time::Duration) {
        self.sleep_watching(d, None);
    }

    /// Sleeps up to `d`, waking early when the flag is raised or when the
    /// watched process exits; returns whether it exited.
    pub fn sleep_watching(
        &self,
        d: std::time::Duration,
        watch: Option<&crate::sys::pidfd::PidExit>,
    ) -> bool {
        let end = std::time::Instant::now() + d;
        while !self.raised() {
            let now = std::time::Instant::now();
            if now >= end {
                break;
            }
            let step = (end - now).min(std::time::Duration::from_millis(50));
            match watch {
                Some(w) if w.wait(step) => return true,
                Some(_) => {}
                None => std::thread::sleep(step),
            }
        }
        false
    }
}
