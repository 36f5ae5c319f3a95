//! The floor of `bench statements`' USDT rounds: bpftrace counting the
//! hits at the two USDT sites `statements --usdt --simple-only` probes.
use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context, bail};

use super::procs::interrupt;

/// bpftrace counting the hits of uprobes at `--usdt --simple-only`'s two
/// USDT sites: the trap and an empty-ish program, nothing of ttp.
pub(super) struct UprobeFloor {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl UprobeFloor {
    pub(super) fn start(postgres: &Path) -> anyhow::Result<UprobeFloor> {
        let bin = postgres.display();
        let script = format!(
            "BEGIN {{ printf(\"floor ready\\n\"); }} usdt:{bin}:postgresql:query__start, usdt:{bin}:postgresql:query__done {{ @hits = count(); }}"
        );
        let mut child = Command::new("bpftrace")
            .args(["-e", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting bpftrace")?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        loop {
            match lines.recv_timeout(Duration::from_secs(60)) {
                Ok(l) if l.contains("floor ready") => break,
                Ok(_) => {}
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!("bpftrace's floor probes not ready within 60 s");
                }
            }
        }
        Ok(UprobeFloor { child, lines })
    }

    /// Stops bpftrace and returns the hits it printed.
    pub(super) fn stop(mut self) -> anyhow::Result<f64> {
        interrupt(&mut self.child)?;
        self.lines
            .iter()
            .find_map(|l| l.strip_prefix("@hits: ")?.trim().parse().ok())
            .context("bpftrace printed no @hits")
    }
}
