//! What the tests of settings ttp holds (delay accounting, free page
//! reporting) share: whether a live ttp holds one, killing a ttp, and the
//! `check` that follows a kill.
use std::time::{Duration, Instant};

use super::{json_file, temp_path, ttp};

/// Whether some live ttp holds one of these lock files (under /run/ttp,
/// and of earlier builds): tested under the run directory's lock, as ttp
/// tests it (sys/run_state.rs), so that a ttp starting meanwhile does not
/// take this probe for a live instance.
pub fn held_by_a_live_ttp(locks: &[&str]) -> bool {
    use std::os::fd::AsRawFd;
    let dir = std::fs::File::open("/run/ttp").ok();
    if let Some(d) = &dir {
        // SAFETY: flock on an open descriptor; closing it drops the lock.
        unsafe { libc::flock(d.as_raw_fd(), libc::LOCK_EX) };
    }
    locks.iter().any(|p| {
        let Ok(f) = std::fs::File::open(p) else {
            return false;
        };
        // SAFETY: flock on an open descriptor; closing it drops the lock.
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) != 0 }
    })
}

pub fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn sigkill(child: &mut std::process::Child) {
    // SAFETY: kill of our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    let status = child.wait().expect("wait ttp");
    assert!(!status.success());
}

/// `check` after a kill: its `--json` report and its text.
pub fn check_after_kill(name: &str) -> (serde_json::Value, String) {
    let json = temp_path(name);
    let (code, out, err) = ttp(&[
        "check",
        "--sample",
        "100ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        code == 0 || code == 1,
        "check failed to run ({code}): {err}"
    );
    let report = json_file(&json);
    let _ = std::fs::remove_file(&json);
    (report, out)
}

/// The children of `pid` whose command is `comm`.
pub fn children_named(pid: u32, comm: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
                let after = &s[s.rfind(')').unwrap_or(0) + 2..];
                after.split_whitespace().nth(1) == Some(&pid.to_string())
            }) && std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .collect()
}

/// Waits until `pid` (a `ttp run`) has started its measured program
/// `comm`, and returns that program's pids.
pub fn measured_program(pid: u32, comm: &str) -> Vec<u32> {
    let mut program = Vec::new();
    wait_for(
        "the measured program started",
        Duration::from_secs(30),
        || {
            program = children_named(pid, comm);
            !program.is_empty()
        },
    );
    program
}
