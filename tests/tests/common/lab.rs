//! Shared by the lab tests (lab*.rs): a throw-away lab server with a
//! scratch directory, `lab init` and `lab submit` of a spec the test
//! writes, workers started in the background, and the checks every lab
//! test makes of a refusal or of a child that must end.
use std::{
    path::PathBuf,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use super::pg::{Cluster, stderr, ttp};

/// A lab server (a throw-away cluster, see common::pg) and a scratch
/// directory for specs and exports, removed on drop.
pub struct LabServer {
    pub c: Cluster,
    /// The lab's connection string (the cluster's socket).
    pub url: String,
    pub dir: PathBuf,
}

impl LabServer {
    /// A server named `name`, not yet initialised (`lab init`).
    pub fn start(name: &str) -> LabServer {
        Self::start_with(name, "")
    }

    /// [`LabServer::start`] with more server options (`-c name=value …`).
    pub fn start_with(name: &str, extra_opts: &str) -> LabServer {
        let c = Cluster::start_with(name, extra_opts);
        let url = c.conninfo();
        let dir = super::temp_path(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        LabServer { c, url, dir }
    }

    /// A server with the lab's schema (`lab init`).
    pub fn initialised(name: &str) -> LabServer {
        let lab = Self::start(name);
        lab.init();
        lab
    }

    pub fn init(&self) {
        let o = ttp(&["lab", "init", "--lab", &self.url]);
        assert!(o.status.success(), "lab init: {}", stderr(&o));
    }

    /// Writes `spec` to the scratch directory as `file` and submits it;
    /// returns `lab submit`'s output with `extra` arguments.
    pub fn submit_as(&self, file: &str, spec: &str, extra: &[&str]) -> Output {
        let path = self.dir.join(file);
        std::fs::write(&path, spec).unwrap();
        let mut args = vec!["lab", "submit", path.to_str().unwrap(), "--lab", &self.url];
        args.extend_from_slice(extra);
        ttp(&args)
    }

    /// [`LabServer::submit_as`] of spec.toml, which must succeed.
    pub fn submit(&self, spec: &str) {
        let o = self.submit_as("spec.toml", spec, &[]);
        assert!(o.status.success(), "lab submit: {}", stderr(&o));
    }

    /// A worker of `label` on this lab in the background (output piped),
    /// with more arguments.
    pub fn worker(&self, label: &str, extra: &[&str]) -> Child {
        Command::new(super::ttp_bin())
            .args(["lab", "worker", "--lab", &self.url, "--host-label", label])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a worker")
    }

    pub fn psql(&self, sql: &str) -> String {
        self.c.psql(sql)
    }
}

impl Drop for LabServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `[[command]]` of fixture-spin burning `cpu_ms` of CPU, `n` QEs,
/// with `--state DIR` (its own log of executions) when given, and the
/// TOML inline table `labels` (e.g. `{ query = "spin" }`) when not empty.
pub fn spin_command(
    name: &str,
    cpu_ms: u64,
    n: u32,
    state: Option<&std::path::Path>,
    labels: &str,
) -> String {
    let mut argv = format!(
        "\"{}\", \"--cpu-ms\", \"{cpu_ms}\"",
        super::fixture("fixture-spin").display()
    );
    if let Some(s) = state {
        std::fs::create_dir_all(s).unwrap();
        argv += &format!(", \"--state\", \"{}\"", s.display());
    }
    let mut c = format!("[[command]]\nname = \"{name}\"\nargv = [{argv}]\nn = {n}\n");
    if !labels.is_empty() {
        c += &format!("labels = {labels}\n");
    }
    c
}

/// A usage error: exit 2 and one line on standard error naming `needle`.
pub fn assert_refused(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
    let e = stderr(o);
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    assert!(e.contains(needle), "{needle:?} in {e}");
}

/// Waits for a child that ends on its own; one still running after
/// `secs` is killed (the test then fails on its status instead of
/// hanging).
pub fn wait_or_kill(mut child: Child, secs: u64) -> Output {
    let until = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    child.wait_with_output().unwrap()
}

pub fn signal(child: &Child, sig: i32) {
    // SAFETY: kill on the pid of a child this test started and has not
    // yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}
