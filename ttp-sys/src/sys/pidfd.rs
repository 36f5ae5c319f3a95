//! Waiting for a process to end without polling /proc: a pidfd
//! (pidfd_open(2), Linux 5.3) becomes readable when the process exits, so a
//! measurement that ends with its target ends within the poll's wake-up
//! latency of the exit, not at the next refresh of the live table.
use std::{
    io,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    time::Duration,
};

/// A process whose end can be waited for.
pub struct PidExit(OwnedFd);

impl PidExit {
    /// A pidfd of `pid` (any process, not only a child).
    pub fn open(pid: u32) -> io::Result<Self> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the fd was just created and is owned by nobody else.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    /// Waits up to `d`; true once the process has exited.
    pub(crate) fn wait(&self, d: Duration) -> bool {
        let mut p = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = d.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd; EINTR (a signal) returns early, which the
        // caller's loop handles like a timeout.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that lives 300 ms: not exited at 50 ms, seen exited well
    /// before a 10 s wait would end, and seen again at once (the fd stays
    /// readable). Catches a wait that sleeps its whole timeout or never
    /// sees the exit.
    #[test]
    fn wakes_when_the_process_exits() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .expect("sleep");
        let w = PidExit::open(child.id()).expect("pidfd_open");
        assert!(!w.wait(Duration::from_millis(50)));
        let t = std::time::Instant::now();
        assert!(w.wait(Duration::from_secs(10)));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(w.wait(Duration::ZERO));
        child.wait().unwrap();
    }
}
