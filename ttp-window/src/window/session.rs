//! A measurement session: what every command that measures with the kernel
//! ledger sets up once and undoes on drop. It checks the privileges, turns
//! delay accounting on and, where asked, a VM's free page reporting off
//! (both restored when the session ends), loads the ledger
//! and seeds it with the threads already running (so their first switch is
//! accounted, docs/ledger.md), listens for taskstats exit records, reads
//! the tick rate of /proc's counters (USER_HZ) and the machine facts, and
//! hands out the [`QeContext`] of the TTPv2 Fig. 5 sequence (window/qe.rs)
//! and the stop flag Ctrl-C raises. `blame` opens it with the blame detail
//! loaded ([`MeasurementSession::open_blame`]).
//!
//! Fields drop in declaration order: the exit listener, then the ledger
//! (detaching its programs), then the delay-accounting and page-reporting
//! guards.
use std::{collections::HashMap, sync::mpsc::Receiver};

use anyhow::Context;

use crate::window::context::QeContext;
use ttp_ledger::{
    collect::{
        machine::MachineFacts,
        taskstats::{ExitListener, TaskstatsError, TaskstatsRecord},
    },
    probe::{AttachOptions, Ledger, SeedThread, probe_error_ctx, seed},
};
use ttp_sys::sys::{
    delayacct::DelayAcct, page_reporting::PageReporting, signals::StopFlag, spawn::RunAs,
};

/// How the ledger's block-I/O wait relates to /proc's; stated in every
/// TTPv2 report as a deviation (Sec. 9 (6)).
/// How long the Step 0 snapshot samples CPU use and steal time (the
/// default of `ttp-ebpf check --sample`).
pub(crate) const SETUP_SAMPLE: std::time::Duration = std::time::Duration::from_secs(1);

const BLOCK_IO_DEVIATION: &str = "BlockIO is the kernel ledger's block-I/O wait (switch-out with in_iowait to wakeup), in ticks; /proc's delayacct_blkio_ticks is reported beside it as blkio_proc_ticks";

/// What a session sets up beyond the seeded ledger.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionOptions {
    /// Load the per-event stream of `--trace`.
    pub trace: bool,
    /// Switch delay accounting on for the session (taskstats and
    /// /proc's delayacct_blkio_ticks need it).
    pub delay_accounting: bool,
    /// Listen for taskstats exit records (EMP's PT, TTPv2's stopped
    /// processes).
    pub taskstats_exits: bool,
    /// Size of the ledger's thread-account map instead of the one chosen
    /// from threads-max (`attach --max-threads`).
    pub max_threads: Option<u32>,
    /// Load the statement programs for the PostgreSQL server with this
    /// postmaster pid (`statements`).
    pub statements_of: Option<u32>,
    /// With `statements_of`: boundaries at the client socket.
    pub statements_socket: Option<ttp_ledger::probe::SocketStatements>,
    /// Leave the ledger's own programs unattached (and unseeded).
    pub no_ledger_programs: bool,
    /// Leave the kernel's BPF statistics off.
    pub no_bpf_stats: bool,
    /// Size of the exit-record ring instead of the one sized for
    /// `attach --all` (probe/exits.rs).
    pub exit_ring_bytes: Option<u32>,
    /// Load the wake-up hook so that `wake_latency_ns` is measured
    /// (`--wake-latency`; the trace loads it anyway).
    pub wake_latency: bool,
    /// Load the interrupt programs so that `irq_ns` is measured
    /// (`--irq-time`).
    pub irq_time: bool,
    /// A fixed exit-record queue, reserved at the start (`attach`: memory
    /// that does not grow with fork storms; probe/exits.rs).
    pub fixed_exit_queue: bool,
    /// Hold a VM's free page reporting at its largest order for the
    /// session (the commands that repeat executions; restored when the
    /// session ends, sys/page_reporting.rs).
    pub hold_page_reporting: bool,
}

/// One measurement session; see the module documentation.
pub struct MeasurementSession {
    listener: Option<(ExitListener, Receiver<TaskstatsRecord>)>,
    /// Why the exit listener is missing, when it was asked for.
    pub listener_error: Option<TaskstatsError>,
    pub ledger: Ledger,
    delay_accounting: Option<DelayAcct>,
    page_reporting: Option<PageReporting>,
    /// USER_HZ, the tick rate of /proc's counters (100 when unreadable).
    pub user_hz: u64,
    /// The threads /proc listed when the ledger was attached.
    pub existing_threads: Vec<SeedThread>,
    /// How many of them were seeded into the ledger.
    pub seeded: usize,
    /// CLOCK_MONOTONIC ns when the ledger began loading; its `ready_ns`
    /// less this is how long loading and attaching took.
    pub attach_started_ns: u64,
}

impl MeasurementSession {
    /// Opens a session. A missing privilege or a kernel without BTF is a
    /// usage error (exit 2) naming what to do.
    pub fn open(options: SessionOptions) -> anyhow::Result<Self> {
        Self::open_ledger(options, false)
    }

    /// A session whose ledger carries the blame detail (per-CPU splits,
    /// disk I/O per device, memory stalls; `Ledger::attach_blame`), without
    /// delay accounting or exit listener: what `blame` measures with.
    pub fn open_blame() -> anyhow::Result<Self> {
        Self::open_ledger(SessionOptions::default(), true)
    }

    fn open_ledger(options: SessionOptions, blame_detail: bool) -> anyhow::Result<Self> {
        ttp_sys::sys::privileges::require_bpf()?;
        // What a SIGKILLed instance left of any setting is put back first
        // (sys/run_state.rs) and said on stderr, whatever this session
        // changes itself.
        ttp_sys::sys::run_state::restore_leftovers_and_say();
        let delay_accounting = if options.delay_accounting {
            // A session that changes a setting ends through its destructors:
            // from here on a signal only raises the stop flag.
            StopFlag::install().context("installing signal handlers")?;
            DelayAcct::enable()
        } else {
            None
        };
        let page_reporting = options.hold_page_reporting.then(|| {
            // Its restore runs from the destructors, as delay accounting's.
            StopFlag::install().map(|_| PageReporting::hold())
        });
        let page_reporting = page_reporting
            .transpose()
            .context("installing signal handlers")?;
        let attach_started_ns = ttp_sys::sys::clock::monotonic_ns();
        let mut ledger = if blame_detail {
            Ledger::attach_blame()
        } else {
            Ledger::attach_with(&AttachOptions {
                trace: options.trace,
                max_threads: options.max_threads,
                statements_of: options.statements_of,
                statements_socket: options.statements_socket,
                no_ledger_programs: options.no_ledger_programs,
                no_bpf_stats: options.no_bpf_stats,
                exit_ring_bytes: options.exit_ring_bytes,
                wake_latency: options.wake_latency,
                irq_time: options.irq_time,
                fixed_exit_queue: options.fixed_exit_queue,
                ..Default::default()
            })
        }
        .map_err(probe_error_ctx)?;
        let (existing_threads, seeded) = if options.no_ledger_programs {
            (Vec::new(), 0)
        } else {
            let threads = seed::threads_from_proc();
            let seeded = ledger.seed(&threads);
            (threads, seeded)
        };
        let (listener, listener_error) = if options.taskstats_exits {
            match ExitListener::start() {
                Ok(l) => (Some(l), None),
                Err(e) => (None, Some(e)),
            }
        } else {
            (None, None)
        };
        Ok(MeasurementSession {
            listener,
            listener_error,
            ledger,
            delay_accounting,
            page_reporting,
            user_hz: ttp_ledger::collect::clock::user_hz().unwrap_or(100),
            existing_threads,
            seeded,
            attach_started_ns,
        })
    }

    /// The flag Ctrl-C, SIGTERM and SIGHUP raise. Its handlers are
    /// installed by a session that switches delay accounting on (before the
    /// switch), otherwise on the first call: a command that never asks and
    /// changes nothing keeps the default actions. One flag a process.
    pub fn stop_flag(&self) -> anyhow::Result<StopFlag> {
        StopFlag::install().context("installing signal handlers")
    }

    /// Whether this session switched delay accounting on (it is restored
    /// when the session ends); stated in reports.
    pub fn delay_accounting_switched_on(&self) -> bool {
        self.delay_accounting
            .as_ref()
            .is_some_and(|d| d.switched_on())
    }

    /// Each existing process's parent, as /proc listed them when the
    /// ledger was attached.
    pub fn parents(&self) -> HashMap<u32, u32> {
        self.existing_threads
            .iter()
            .map(|t| (t.tgid, t.ppid))
            .collect()
    }

    /// How long loading and attaching the ledger took, in ms.
    pub fn attach_ms(&self) -> f64 {
        self.ledger.ready_ns.saturating_sub(self.attach_started_ns) as f64 / 1e6
    }

    /// Nanoseconds per USER_HZ tick.
    pub(crate) fn tick_ns(&self) -> u64 {
        1_000_000_000 / self.user_hz
    }

    /// The taskstats exit listener, when it runs.
    pub fn exit_listener(&self) -> Option<&ExitListener> {
        self.listener.as_ref().map(|(l, _)| l)
    }

    /// The exit records received so far, when the listener runs.
    pub fn taskstats_exits(&self) -> Option<&Receiver<TaskstatsRecord>> {
        self.listener.as_ref().map(|(_, rx)| rx)
    }

    /// The machine facts of a TTPv2 report (Sec. 9 (2), (3), (6)), with
    /// what this session changed, the ledger's block-I/O deviation and the
    /// Step 0 check snapshot (sampling CPU use and steal for
    /// [`SETUP_SAMPLE`]).
    pub fn machine_facts(&self, cold_cache: bool) -> MachineFacts {
        let mut machine = ttp_ledger::collect::machine::facts();
        machine.delay_accounting_switched_on = self.delay_accounting_switched_on();
        machine.cold_cache = Some(cold_cache);
        // Step 0 (Sec. 8.1) as `check` finds it, with delay accounting as
        // the measurement has it (the snapshot EMP records too).
        machine.setup_check = Some(ttp_sys::sys::setup_check::run_checks(
            std::path::PathBuf::from("/"),
            &ttp_sys::sys::setup_check::live::LiveProbes,
            SETUP_SAMPLE,
        ));
        machine.deviations.push(BLOCK_IO_DEVIATION.into());
        if let Some(s) = self.page_reporting.as_ref().and_then(|p| p.statement()) {
            machine.deviations.push(s);
        }
        machine
    }

    /// A QE context on this session's ledger and exit records, with the
    /// defaults of a measured command (no trace, no utilities, no timeout,
    /// no blame); callers set what their command changes.
    pub fn qe_context(&mut self, run_as: RunAs) -> QeContext<'_> {
        let tick_ns = self.tick_ns();
        QeContext {
            ledger: &mut self.ledger,
            recorder: None,
            taskstats_exits: self.listener.as_ref().map(|(_, rx)| rx),
            own_tgid: std::process::id(),
            utilities: &[],
            query_by_name: false,
            tick_ns,
            timeout: None,
            run_as,
            beside: None,
        }
    }
}
