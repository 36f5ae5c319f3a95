//! A PostgreSQL server's processes as /proc shows them, for `serve
//! --postgres` (postgres.rs): the postmaster of a data directory, its
//! checkpointer (a new one under the same postmaster is a crash-restart),
//! and the servers running on the machine.
use std::path::{Path, PathBuf};

/// The postmaster of `data` and when it started (Unix ns), when it runs:
/// the pid of `postmaster.pid`'s first line, alive, with `data` as its
/// working directory (the postmaster changes into it at start).
pub(crate) fn postmaster_of(data: &Path) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(data.join("postmaster.pid")).ok()?;
    let mut lines = text.lines();
    let pid: u32 = lines.next()?.trim().parse().ok()?;
    let started: u64 = lines.nth(1)?.trim().parse().ok()?;
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
    (cwd == data).then_some((pid, started.saturating_mul(1_000_000_000)))
}

/// The pid of the postmaster's checkpointer, when it has one.
pub(crate) fn checkpointer_of(postmaster: u32) -> Option<u32> {
    let children =
        std::fs::read_to_string(format!("/proc/{postmaster}/task/{postmaster}/children")).ok()?;
    children
        .split_whitespace()
        .filter_map(|c| c.parse::<u32>().ok())
        .find(|c| {
            std::fs::read(format!("/proc/{c}/cmdline"))
                .is_ok_and(|t| String::from_utf8_lossy(&t).contains("checkpointer"))
        })
}

/// The data directories of the PostgreSQL servers running now: each
/// postmaster's working directory (a process running a server binary whose
/// parent does not run the same binary).
pub(crate) fn running_servers() -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
            continue;
        };
        if !matches!(
            exe.file_name().and_then(|n| n.to_str()),
            Some("postgres" | "postmaster")
        ) {
            continue;
        }
        let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<u32>().ok())
            });
        if ppid.is_some_and(|pp| {
            std::fs::read_link(format!("/proc/{pp}/exe")).ok() == Some(exe.clone())
        }) {
            continue;
        }
        if let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd"))
            && postmaster_of(&cwd).is_some_and(|(p, _)| p == pid)
        {
            found.push(cwd);
        }
    }
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a stale postmaster.pid (its pid now another process, or
    /// gone) taken for a running server.
    #[test]
    fn a_stale_pid_file_names_no_server() {
        let dir = tempfile::tempdir().unwrap();
        // Our own pid: alive, but its working directory is not `dir`.
        let me = std::process::id();
        std::fs::write(
            dir.path().join("postmaster.pid"),
            format!("{me}\n{}\n1700000000\n5432\n", dir.path().display()),
        )
        .unwrap();
        assert_eq!(postmaster_of(dir.path()), None);
        // A pid that is not running.
        std::fs::write(
            dir.path().join("postmaster.pid"),
            format!("{}\nx\n1700000000\n", u32::MAX - 1),
        )
        .unwrap();
        assert_eq!(postmaster_of(dir.path()), None);
    }
}
