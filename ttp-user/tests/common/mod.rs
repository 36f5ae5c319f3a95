//! Helpers shared by the live tests: the root check and a forked child that
//! burns a known CPU time, then waits to be told to exit.
#![allow(dead_code)]

pub mod module_graph;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// True when the test may go on. Tests that need root skip (with a note)
/// when not root, except in CI (CI=true), where they must fail instead.
pub fn require_root(test: &str) -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test} needs root, and CI=true: run the tests as root");
    }
    // Straight to stderr, past the test harness's output capture, so the
    // skip is visible in a normal run.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "skipped {test}: needs root (run the tests with sudo)"
    );
    false
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two-element array on success.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: fresh descriptors owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A forked child that has burnt `cpu_ms` of CPU and now blocks (state S)
/// until [`Spinner::finish`], so its counters hold still while they are
/// read from several sources.
pub struct Spinner {
    pub pid: i32,
    go: Option<OwnedFd>,
}

impl Spinner {
    pub fn start(cpu_ms: u64) -> Spinner {
        let (ready_r, ready_w) = pipe();
        let (go_r, go_w) = pipe();
        // SAFETY: the child only computes and makes async-signal-safe calls
        // (clock_gettime, write, read, _exit) before _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let start = thread_cpu_ns();
            let mut x = 1u64;
            while thread_cpu_ns() - start < cpu_ms * 1_000_000 {
                for i in 0..20_000u64 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
                }
            }
            // SAFETY: plain system calls on inherited descriptors.
            unsafe {
                libc::write(ready_w.as_raw_fd(), b"r".as_ptr().cast(), 1);
                let mut b = 0u8;
                libc::read(go_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1);
                libc::_exit(0);
            }
        }
        drop(ready_w);
        drop(go_r);
        let mut b = 0u8;
        // SAFETY: reads one byte into a live buffer.
        let n = unsafe { libc::read(ready_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1) };
        assert_eq!(n, 1, "spinner died before it was ready");
        Spinner {
            pid,
            go: Some(go_w),
        }
    }

    /// Waits until the child is asleep in its read (stat state `S`), so its
    /// counters no longer move. Panics after 2 s.
    pub fn wait_asleep(&self) {
        let path = format!("/proc/{}/stat", self.pid);
        for _ in 0..2000 {
            let stat = std::fs::read_to_string(&path).unwrap();
            let state = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next());
            if state == Some('S') {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("spinner {} never went to sleep", self.pid);
    }

    /// Lets the child exit and reaps it.
    pub fn finish(mut self) {
        self.reap();
    }

    fn reap(&mut self) {
        if let Some(go) = self.go.take() {
            // SAFETY: writes one byte from a live buffer.
            unsafe { libc::write(go.as_raw_fd(), b"g".as_ptr().cast(), 1) };
            let mut status = 0;
            // SAFETY: waits for our own child.
            unsafe { libc::waitpid(self.pid, &mut status, 0) };
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.reap();
    }
}

/// Every `.rs` file under `dir`, recursively (unsorted).
pub fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
