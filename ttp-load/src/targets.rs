//! What the load is sent to. A [`TargetFactory`] is the validated
//! description of a target (what the user asked for); `connect` turns it into
//! a live [`Target`] for one phase, on that phase's clock.
//!
//! Adding a target (e.g. a PostgreSQL pool with prepared statements) means
//! one factory + one target type; the driver, the models and the outputs do
//! not change.
use std::{future::Future, pin::Pin, process::Stdio, sync::Arc};

use super::clock::{Clock, ClockKind};

/// The completion of one request.
pub type RequestFuture = Pin<Box<dyn Future<Output = Result<(), RequestError>> + Send + 'static>>;

/// A target being connected for one phase.
pub type ConnectFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Arc<dyn Target>, TargetError>> + Send + 'a>>;

/// A live target: issues one request per call.
pub trait Target: Send + Sync {
    /// Sends one request now. The future resolves when its response is
    /// complete; dropping it abandons the request (and must release what it
    /// holds, e.g. kill the child process).
    fn call(&self) -> RequestFuture;
}

/// A target as the user described it, able to connect once per phase.
pub trait TargetFactory: Send + Sync {
    /// The target's description for reports and JSON, with a `"kind"` field.
    fn describe(&self) -> serde_json::Value;

    /// One line for the terminal.
    fn summary(&self) -> String;

    /// Whether the target can run on the virtual clock (only in-process
    /// targets whose waits are all clock timers can).
    fn supports_virtual_clock(&self) -> bool;

    /// Connects for one phase. `concurrency` is the most requests the phase
    /// will have in flight at once (the open model's --max-in-flight, the
    /// closed model's --connections), e.g. to size a connection pool.
    fn connect<'a>(&'a self, clock: &'a Clock, concurrency: usize) -> ConnectFuture<'a>;
}

/// A target could not be prepared for a phase.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("target {target} cannot run on the {clock:?} clock; use --clock real")]
    WrongClock {
        target: &'static str,
        clock: ClockKind,
    },
    #[error("could not connect to {target}: {reason}")]
    Connect { target: String, reason: String },
}

/// Why one request failed. `kind()` is the key under which it is counted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("could not start {program}: {reason}")]
    Spawn { program: String, reason: String },
    #[error("exited with status {code}")]
    ExitStatus { code: i32 },
    #[error("killed by signal {signal}")]
    Signal { signal: i32 },
    #[error("no response within the per-request timeout")]
    Timeout,
    #[error("{kind}: {message}")]
    Other { kind: &'static str, message: String },
}

impl RequestError {
    /// The error's kind as counted in reports: `spawn`, `exit_status_N`,
    /// `signal_N`, `timeout`, or a target-specific kind.
    pub fn kind(&self) -> String {
        match self {
            RequestError::Spawn { .. } => "spawn".into(),
            RequestError::ExitStatus { code } => format!("exit_status_{code}"),
            RequestError::Signal { signal } => format!("signal_{signal}"),
            RequestError::Timeout => "timeout".into(),
            RequestError::Other { kind, .. } => (*kind).into(),
        }
    }
}

/// `--exec -- CMD…`: one process per request, the request's response is the
/// process's exit (status 0 is success). Its output is discarded.
#[derive(Debug, Clone)]
pub struct ExecFactory {
    argv: Vec<String>,
    /// uid and gid the requests run as; None: ttp's own.
    creds: Option<(u32, u32)>,
}

impl ExecFactory {
    /// `argv` must be non-empty; the program must be found (a path, or a name
    /// on $PATH) so that a typo fails once, before the run, not per request.
    pub fn new(argv: Vec<String>) -> Result<Self, String> {
        let Some(program) = argv.first() else {
            return Err(
                "--exec needs a command after `--`, e.g. --exec -- sh -c 'sleep 0.01'".into(),
            );
        };
        if !program_exists(program) {
            return Err(format!(
                "--exec: program `{program}` not found; give a path or a command on $PATH"
            ));
        }
        Ok(Self { argv, creds: None })
    }

    /// Runs every request's process as `uid`:`gid` (with no supplementary
    /// groups): the invoking user when ttp runs under sudo.
    pub fn run_as(mut self, uid: u32, gid: u32) -> Self {
        self.creds = Some((uid, gid));
        self
    }
}

fn program_exists(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

impl TargetFactory for ExecFactory {
    fn describe(&self) -> serde_json::Value {
        serde_json::json!({"kind": "exec", "argv": self.argv})
    }

    fn summary(&self) -> String {
        format!("exec `{}` (one process per request)", self.argv.join(" "))
    }

    fn supports_virtual_clock(&self) -> bool {
        false
    }

    fn connect<'a>(&'a self, clock: &'a Clock, _concurrency: usize) -> ConnectFuture<'a> {
        Box::pin(async move {
            if clock.kind() != ClockKind::Real {
                return Err(TargetError::WrongClock {
                    target: "exec",
                    clock: clock.kind(),
                });
            }
            Ok(Arc::new(ExecTarget {
                argv: Arc::new(self.argv.clone()),
                creds: self.creds,
            }) as Arc<dyn Target>)
        })
    }
}

struct ExecTarget {
    argv: Arc<Vec<String>>,
    creds: Option<(u32, u32)>,
}

impl Target for ExecTarget {
    fn call(&self) -> RequestFuture {
        let argv = self.argv.clone();
        let creds = self.creds;
        Box::pin(async move {
            let mut cmd = tokio::process::Command::new(&argv[0]);
            if let Some((uid, gid)) = creds {
                cmd.uid(uid).gid(gid);
            }
            cmd.args(&argv[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                // An abandoned request (timeout, end of run) must not leave
                // its process behind.
                .kill_on_drop(true);
            let status = cmd.status().await.map_err(|e| RequestError::Spawn {
                program: argv[0].clone(),
                reason: e.to_string(),
            })?;
            if status.success() {
                return Ok(());
            }
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(code), _) => Err(RequestError::ExitStatus { code }),
                (None, Some(signal)) => Err(RequestError::Signal { signal }),
                (None, None) => Err(RequestError::Other {
                    kind: "exit_unknown",
                    message: format!("{status}"),
                }),
            }
        })
    }
}
