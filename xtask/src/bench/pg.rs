//! A throw-away PostgreSQL server for the benches that need one (`bench
//! lab`, `bench statements`): the newest installed version, in a temporary
//! directory, run as the `postgres` user (the server refuses root),
//! listening only on a Unix socket there; stopped and removed on drop.
use std::{
    os::unix::{fs::chown, process::CommandExt},
    path::PathBuf,
    process::{Command, Stdio},
};

use anyhow::{Context, bail};

use crate::util;

pub struct Server {
    /// The socket directory, and the place for the bench's own files.
    pub dir: PathBuf,
    pub data: PathBuf,
    /// The server's bin directory (initdb, pg_ctl, psql, pgbench).
    pub bin: PathBuf,
    pub port: u16,
    uid: u32,
    gid: u32,
}

fn id_of(flag: &str) -> anyhow::Result<u32> {
    util::output("id", &[flag, "postgres"])
        .and_then(|s| s.trim().parse().ok())
        .context("no `postgres` user to run the server as (apt-get install postgresql)")
}

/// The newest installed PostgreSQL's bin directory, by version number.
fn pg_bin() -> anyhow::Result<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .context("PostgreSQL is not installed (cargo xtask setup, or apt-get install postgresql)")?
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, b)| b)
        .context("no /usr/lib/postgresql/*/bin/initdb")
}

impl Server {
    /// Initialises and starts a server in `ttp-bench-NAME-PID` under the
    /// temporary directory, with the server's defaults plus `settings`
    /// (`-c name=value …`, given to the postmaster). Its superuser is `ttp`.
    pub fn start(name: &str, settings: &str) -> anyhow::Result<Server> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let dir = std::env::temp_dir().join(format!("ttp-bench-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let s = Server {
            data: dir.join("data"),
            dir,
            bin: pg_bin()?,
            port,
            uid: id_of("-u")?,
            gid: id_of("-g")?,
        };
        chown(&s.dir, Some(s.uid), Some(s.gid))?;
        s.as_server(
            "initdb",
            &[
                "-D",
                &s.data.display().to_string(),
                "-U",
                "ttp",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        let opts = format!(
            "-k {} -p {} -c listen_addresses='' {settings}",
            s.dir.display(),
            s.port
        );
        let log = s.dir.join("log");
        s.as_server(
            "pg_ctl",
            &[
                "start",
                "-D",
                &s.data.display().to_string(),
                "-w",
                "-t",
                "60",
                "-l",
                &log.display().to_string(),
                "-o",
                &opts,
            ],
        )?;
        Ok(s)
    }

    /// Runs one of the server's programs as the `postgres` user.
    pub fn as_server(&self, program: &str, args: &[&str]) -> anyhow::Result<()> {
        let out = Command::new(self.bin.join(program))
            .args(args)
            .current_dir(&self.dir)
            .uid(self.uid)
            .gid(self.gid)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {program}"))?;
        if !out.status.success() {
            bail!(
                "{program} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// The postmaster's pid.
    pub fn postmaster(&self) -> anyhow::Result<u32> {
        std::fs::read_to_string(self.data.join("postmaster.pid"))?
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .context("no postmaster.pid")
    }

    /// A libpq connection string to database `db` as the superuser.
    pub fn url(&self, db: &str) -> String {
        format!(
            "host={} port={} user=ttp dbname={db}",
            self.dir.display(),
            self.port
        )
    }

    /// psql's unaligned, tuples-only output of `sql` on database `db`.
    pub fn psql(&self, db: &str, sql: &str) -> anyhow::Result<String> {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-F",
                " ",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
            ])
            .arg(self.url(db))
            .args(["-c", sql])
            .output()
            .context("running psql")?;
        if !out.status.success() {
            bail!(
                "psql {sql}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.as_server(
            "pg_ctl",
            &[
                "stop",
                "-D",
                &self.data.display().to_string(),
                "-m",
                "fast",
                "-w",
            ],
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---- the server's CPU, and delay accounting for a round ----

pub(super) fn ticks_per_second() -> f64 {
    util::output("getconf", &["CLK_TCK"])
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// /proc/PID/stat fields after the command name (field 3 is index 0).
pub(super) fn stat_fields(pid: u32) -> Vec<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect()
}

pub(super) fn children(pm: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        // Field 4 (index 1) is the parent.
        if stat_fields(pid).get(1) == Some(&u64::from(pm)) {
            out.push(pid);
        }
    }
    out
}

/// utime + stime of the postmaster and its live children, plus cutime +
/// cstime of the postmaster (its reaped children), in ticks.
pub(super) fn server_ticks(pm: u32) -> u64 {
    let f = stat_fields(pm);
    let own: u64 = (11..15).map(|i| f.get(i).copied().unwrap_or(0)).sum();
    own + children(pm)
        .into_iter()
        .map(super::procs::cpu_ticks)
        .sum::<u64>()
}

/// `kernel.task_delayacct` switched on for a round, put back as it was
/// when dropped (on error too).
pub(super) struct Delayacct {
    before: String,
}

const TASK_DELAYACCT: &str = "/proc/sys/kernel/task_delayacct";

impl Delayacct {
    pub(super) fn on() -> anyhow::Result<Delayacct> {
        let before = std::fs::read_to_string(TASK_DELAYACCT)
            .with_context(|| format!("reading {TASK_DELAYACCT}"))?;
        std::fs::write(TASK_DELAYACCT, "1").with_context(|| format!("writing {TASK_DELAYACCT}"))?;
        Ok(Delayacct {
            before: before.trim().to_owned(),
        })
    }
}

impl Drop for Delayacct {
    fn drop(&mut self) {
        let _ = std::fs::write(TASK_DELAYACCT, &self.before);
    }
}
