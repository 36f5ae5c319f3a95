//! Emptying PostgreSQL's own buffers for a cold QE. TTPv2 Sec. 3.1:
//! "PostgreSQL supports no such mechanism to clear all of its caches ...
//! The only way to clear these buffers is by restarting PostgreSQL", which
//! makes the cold start "somewhat artificially cold".
use std::{
    io::Read,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use super::error::PgError;

/// How the server is restarted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restart {
    /// `--restart-cmd`: a shell command, run as ttp's own user (root under
    /// sudo), e.g. `systemctl restart postgresql`.
    Command(String),
    /// `pg_ctl restart` of the running server, as the owner of its data
    /// directory, with the options the server was started with
    /// (postmaster.opts).
    PgCtl {
        pg_ctl: PathBuf,
        data_dir: PathBuf,
        uid: u32,
        gid: u32,
    },
}

impl Restart {
    /// Finds how to restart the server whose postmaster is `postmaster`:
    /// its working directory is the data directory (the postmaster changes
    /// into it at start), its pg_ctl lies beside its executable.
    pub(crate) fn discover(postmaster: u32) -> Result<Restart, PgError> {
        use std::os::unix::fs::MetadataExt;
        let no = |reason: String| PgError::NoRestart { reason };
        let data_dir = std::fs::read_link(format!("/proc/{postmaster}/cwd"))
            .map_err(|e| no(format!("cannot read the postmaster's data directory: {e}")))?;
        let exe = std::fs::read_link(format!("/proc/{postmaster}/exe"))
            .map_err(|e| no(format!("cannot read the postmaster's executable: {e}")))?;
        let pg_ctl = exe.with_file_name("pg_ctl");
        if !pg_ctl.is_file() {
            return Err(no(format!("no pg_ctl beside {}", exe.display())));
        }
        if !data_dir.join("postmaster.opts").is_file() {
            return Err(no(format!(
                "{} has no postmaster.opts (not a data directory?)",
                data_dir.display()
            )));
        }
        let meta =
            std::fs::metadata(&data_dir).map_err(|e| no(format!("{}: {e}", data_dir.display())))?;
        Ok(Restart::PgCtl {
            pg_ctl,
            data_dir,
            uid: meta.uid(),
            gid: meta.gid(),
        })
    }

    /// For reports: the command that restarts the server.
    pub(crate) fn describe(&self) -> String {
        match self {
            Restart::Command(c) => c.clone(),
            Restart::PgCtl {
                pg_ctl, data_dir, ..
            } => format!(
                "{} restart -D {} -m fast -w",
                pg_ctl.display(),
                data_dir.display()
            ),
        }
    }

    /// Restarts the server and waits until the restart command has ended
    /// (pg_ctl -w: until the server accepts connections).
    pub fn run(&self) -> Result<(), PgError> {
        let mut cmd = match self {
            Restart::Command(c) => {
                let mut cmd = Command::new("sh");
                cmd.arg("-c").arg(c);
                cmd
            }
            Restart::PgCtl {
                pg_ctl,
                data_dir,
                uid,
                gid,
            } => {
                let mut cmd = Command::new(pg_ctl);
                cmd.args(["restart", "-m", "fast", "-w", "-t", "120", "-D"])
                    .arg(data_dir)
                    .current_dir(data_dir)
                    .env_remove("PGDATA");
                // pg_ctl refuses to run as root; it runs as the owner of the
                // data directory, as the server does.
                // SAFETY: none needed (std drops supplementary groups when
                // root switches uid).
                cmd.uid(*uid).gid(*gid);
                cmd
            }
        };
        // The restarted server inherits pg_ctl's output: a file, not a pipe
        // (a pipe would stay open for the server's lifetime).
        let fail = |reason: String| PgError::Restart {
            command: self.describe(),
            reason,
        };
        let mut log = tempfile_in_tmp().map_err(|e| fail(e.to_string()))?;
        let out = log.try_clone().map_err(|e| fail(e.to_string()))?;
        let err = log.try_clone().map_err(|e| fail(e.to_string()))?;
        let status = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .status()
            .map_err(|e| fail(e.to_string()))?;
        if status.success() {
            return Ok(());
        }
        use std::io::Seek;
        let mut text = String::new();
        let _ = log.seek(std::io::SeekFrom::Start(0));
        let _ = log.read_to_string(&mut text);
        let text = text.trim();
        Err(fail(format!(
            "{status}{}{}",
            if text.is_empty() { "" } else { ": " },
            text.lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join(" | ")
        )))
    }
}

/// An unlinked temporary file in /tmp.
fn tempfile_in_tmp() -> std::io::Result<std::fs::File> {
    let path: PathBuf = Path::new("/tmp").join(format!(
        "ttp-pg-restart-{}-{}.log",
        std::process::id(),
        ttp_sys::sys::clock::monotonic_ns()
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}
