//! What a TTPv2 `run` of commands measures and how, validated once by the
//! command line (as hyperfine's `Options`): the Q@Cs (every command at
//! every parameter value) and the settings every QE shares.
use std::time::Duration;

use ttp_ledger::collect::machine::MachineFacts;
use ttp_sys::sys::{affinity::CpuList, spawn::RunAs};
use ttp_ttpv2::model::{Labels, QcInput, Setup};
use ttp_window::window::{cold_cache::ColdCache, context::QeContext};

/// One Q@C of the run: a command at one value of the scanned parameter,
/// with `{NAME}` already substituted.
#[derive(Debug, Clone, PartialEq)]
pub struct QcSpec {
    pub labels: Labels,
    pub argv: Vec<String>,
    /// `--prepare`: run before each QE, as the command's user.
    pub prepare: Option<String>,
    /// `--plan-cmd`: its output is the QE's plan (the unique-plan check X2).
    pub plan_cmd: Option<String>,
}

/// A run of commands: its Q@Cs and how each QE runs.
pub struct Plan {
    pub qcs: Vec<QcSpec>,
    /// QEs a Q@C (TTPv2's N).
    pub n: u32,
    /// The scanned parameter's name.
    pub parameter: Option<String>,
    /// More than one command: the report compares them.
    pub several_commands: bool,
    /// QE13: an execution running longer is killed.
    pub timeout: Duration,
    /// The first back-off after a transient failure (Sec. 3.2.3).
    pub backoff: Duration,
    /// Exit statuses of the command, `--plan-cmd` or `--prepare` that mean
    /// a transient failure.
    pub transient_exit: Vec<i32>,
    /// The command's standard output is shown (discarded otherwise).
    pub show_output: bool,
    /// Sec. 7.2: the query process is the process of this name.
    pub query_process: Option<String>,
    /// The utility processes' names.
    pub utilities: Vec<String>,
    pub pin: Option<CpuList>,
    pub run_as: RunAs,
    /// `--cold-cache`: what empties the caches before each QE (Sec. 3.1).
    pub cold_cache: Option<ColdCache>,
    /// `--warmup N`: executions of each Q@C's command before its QE 1,
    /// measured, shown and not kept.
    pub warmup: u32,
    /// `--trace`: the ledger records the command's processes.
    pub trace: bool,
    /// `--wake-latency`: the ledger measures wake latency.
    pub wake_latency: bool,
    /// `--irq-time`: the ledger measures interrupt time inside on-CPU.
    pub irq_time: bool,
    /// `--blame`: each QE's blame, over windows of this δt.
    pub blame_window: Option<Duration>,
}

impl Plan {
    /// One empty Q@C per spec, with the set-up every QE shares.
    pub(crate) fn qc_inputs(&self, user_hz: u32, machine: &MachineFacts) -> Vec<QcInput> {
        self.qcs
            .iter()
            .map(|spec| QcInput {
                labels: spec.labels.clone(),
                source: None,
                command: spec.argv.clone(),
                setup: Setup {
                    qes_requested: Some(self.n),
                    user_hz,
                    cpus: machine.cores.unwrap_or(1),
                    timeout_ms: Some(self.timeout.as_millis() as u64),
                    query_process: self.query_process.clone(),
                    utilities: self.utilities.clone(),
                    parameter: self.parameter.clone(),
                    recovery: Default::default(),
                    warmup: Vec::new(),
                },
                qes: Vec::new(),
            })
            .collect()
    }

    /// What a QE of this plan tells the Fig. 5 sequence: the utility
    /// processes, whether the query process is found by name, the time-out.
    pub(crate) fn configure<'x>(&'x self, ctx: &mut QeContext<'x>) {
        ctx.utilities = &self.utilities;
        ctx.query_by_name = self.query_process.is_some();
        ctx.timeout = Some(self.timeout);
    }
}
