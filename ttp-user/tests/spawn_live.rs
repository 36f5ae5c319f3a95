//! Live checks of the held child: nothing of the program runs before
//! release, it runs as the invoking user, and failures are errors rather
//! than hangs or leftovers.
use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::{Duration, Instant};

use common::require_root;
use ttp_sys::sys::invoker::Invoker;
use ttp_sys::sys::spawn::{HeldChild, RunAs, SpawnError};

/// The comm of a live pid, from /proc.
fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap()
        .trim()
        .to_string()
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks existence.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

#[test]
fn held_child_does_not_run_before_release() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut cmd = Command::new("touch");
    cmd.arg(&marker);
    let held = HeldChild::spawn(cmd, RunAs::Current).unwrap();
    let pid = held.pid();
    std::thread::sleep(Duration::from_millis(200));
    // Still the forked test process, not `touch`: execve has not happened,
    // so no probe attached to this pid can miss the program's start.
    assert_ne!(comm(pid), "touch");
    assert!(!marker.exists(), "the program ran before release");
    let running = held.release().unwrap();
    assert_eq!(running.pid(), pid);
    let exit = running.wait().unwrap();
    assert!(exit.status.success(), "{:?}", exit.status);
    assert!(marker.exists());
}

#[test]
fn wait_returns_status_and_rusage() {
    // A shell loop that burns some CPU and exits 7: catches a status read
    // as a raw wait word and rusage left zeroed.
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; exit 7",
    ]);
    let exit = HeldChild::spawn(cmd, RunAs::Current)
        .unwrap()
        .release()
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(exit.status.code(), Some(7));
    assert!(
        exit.rusage.user_us + exit.rusage.system_us > 0,
        "{:?}",
        exit.rusage
    );
    assert!(exit.rusage.max_rss_kb > 0);
}

#[test]
fn dropped_held_child_is_killed_and_reaped() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut cmd = Command::new("touch");
    cmd.arg(&marker);
    let held = HeldChild::spawn(cmd, RunAs::Current).unwrap();
    let pid = held.pid();
    assert!(alive(pid));
    drop(held);
    // Reaped, not a zombie: the pid no longer exists at all.
    assert!(!alive(pid), "child {pid} still exists after drop");
    assert!(!marker.exists(), "the program ran although never released");
}

#[test]
fn exec_failure_after_release_is_an_error_not_a_hang() {
    // The program exists when spawned and is gone at release: execve fails
    // in the child, and release must say so promptly.
    let dir = tempfile::tempdir().unwrap();
    let prog = dir.path().join("vanishing");
    std::fs::copy("/bin/true", &prog).unwrap();
    let held = HeldChild::spawn(Command::new(&prog), RunAs::Current).unwrap();
    let pid = held.pid();
    std::fs::remove_file(&prog).unwrap();
    let t = Instant::now();
    let err = held
        .release()
        .err()
        .expect("exec of a deleted file must fail");
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(matches!(err, SpawnError::Exec { .. }), "{err:?}");
    assert!(err.is_usage());
    assert!(!alive(pid), "failed child {pid} left behind");
}

#[test]
fn runs_as_sudo_uid() {
    if !require_root("runs_as_sudo_uid") {
        return;
    }
    // As if run by `sudo` from the user `nobody` (65534:65534).
    let invoker = Invoker::from_vars(Some("65534"), Some("65534"), None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = dir.path().join("ids");
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(format!(
        "id -u > {0}; id -g >> {0}; id -G >> {0}",
        out.display()
    ));
    let held = HeldChild::spawn(cmd, RunAs::User(invoker)).unwrap();
    // Credentials are switched before the child is held, so a probe that
    // filters on uid sees the program from its first instruction.
    let status = std::fs::read_to_string(format!("/proc/{}/status", held.pid())).unwrap();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert_eq!(
        uid_line.split_whitespace().collect::<Vec<_>>(),
        ["Uid:", "65534", "65534", "65534", "65534"]
    );
    let exit = held.release().unwrap().wait().unwrap();
    assert!(exit.status.success());
    // Effective uid, gid and the whole group list: catches a forgotten
    // setgroups (root's group 0 would remain).
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "65534\n65534\n65534\n"
    );
}

#[test]
fn run_as_current_stays_root() {
    if !require_root("run_as_current_stays_root") {
        return;
    }
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "test \"$(id -u)\" = 0"]);
    let exit = HeldChild::spawn(cmd, RunAs::Current)
        .unwrap()
        .release()
        .unwrap()
        .wait()
        .unwrap();
    assert!(exit.status.success());
}
