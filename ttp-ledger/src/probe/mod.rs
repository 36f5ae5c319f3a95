//! The kernel side, seen from userspace: load ttp's eBPF programs with the
//! running kernel's struct offsets, attach them, and read the ledger.
//!
//! [`Ledger`] owns the loaded object: dropping it detaches every program and
//! frees every map (the RAII guard for everything the probes change).
mod batch;
pub(crate) mod btf;
pub(crate) mod capacity;
pub mod cost;
pub(crate) mod detail;
mod error;
pub mod exits;
pub mod pg_status;
mod read;
pub mod seed;
mod slots;
pub mod statements;
pub mod symbols;
pub mod trace;
pub mod usdt;
pub(crate) mod usdt_attach;

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap, MapData, PerCpuArray},
    programs::BtfTracePoint,
};
pub use error::ProbeError;
use trace::TraceMaps;
use ttp_common::{CpuAccount, DiskAccount, IrqClock, ProcDisk, ThreadAccount};

pub use detail::{DetailAvailability, DetailSnapshot, DetailStats, ThreadDetailKeys};
pub use read::{KernelStats, SeedThread, Snapshot, schedstat};
pub use trace::{BlockPhase, ThreadState, TraceBody, TraceEvent};

/// The eBPF object built by build.rs (empty when built with AYA_BUILD_SKIP=1).
pub(crate) static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/ttp"));

/// The wake-up hook: loaded only where a measure needs the wake-up instant
/// itself (`wake_latency_ns`, the trace's wake-ups); otherwise a sleep ends
/// at its switch-in, back-dated by the kernel's counters (docs/ledger.md).
pub(crate) const WAKEUP_PROGRAM: &str = "sched_wakeup";

/// Programs of the time ledger, with the tp_btf tracepoint each attaches to.
const LEDGER_PROGRAMS: &[(&str, &str)] = &[
    ("sched_switch", "sched_switch"),
    ("sched_wakeup_new", "sched_wakeup_new"),
    ("sched_process_fork", "sched_process_fork"),
    ("sched_process_exec", "sched_process_exec"),
    ("cpu_idle", "cpu_idle"),
    ("block_bio_queue", "block_bio_queue"),
    ("block_io_start", "block_io_start"),
    ("block_rq_issue", "block_rq_issue"),
    ("block_io_done", "block_io_done"),
];

/// Maps only the ledger's programs write (the thread and process
/// accounts, the block requests in flight).
const LEDGER_ONLY_MAPS: &[&str] = &[
    "THREAD_SLOTS",
    "PROC_SLOTS",
    "THREADS",
    "PROC_DISK",
    "REQUESTS",
    "REQUEST_SLOTS",
];

/// The interrupt clock of `--irq-time` (ttp-ebpf/src/irq.rs), exits first:
/// an exit whose entry was not seen adds nothing, an entry whose exit
/// could not yet be seen would leave its CPU's clock stopped.
const IRQ_PROGRAMS: &[(&str, &str)] = &[
    ("irq_handler_exit", "irq_handler_exit"),
    ("softirq_exit", "softirq_exit"),
    ("irq_handler_entry", "irq_handler_entry"),
    ("softirq_entry", "softirq_entry"),
];

/// The local timer (x86's `irq_vectors:local_timer_*`), exit first, when
/// the kernel has it.
const IRQ_TIMER_PROGRAMS: &[(&str, &str)] = &[
    ("local_timer_exit", "local_timer_exit"),
    ("local_timer_entry", "local_timer_entry"),
];

/// `statements`' boundaries at the client socket (ttp-ebpf/src/wire.rs).
const STATEMENTS_SOCKET_PROGRAMS: &[(&str, &str)] = &[
    ("stmt_sock_recv", "sock_recv_length"),
    ("stmt_sock_send", "sock_send_length"),
    ("stmt_exit", "sched_process_exit"),
];

/// Loads the eBPF object (every program of the ledger, the trace, the
/// blame detail and vprofile) with `loader`'s globals; a refusal for want
/// of privileges is [`ProbeError::NotPermitted`].
pub fn load_object(loader: &mut EbpfLoader) -> Result<Ebpf, ProbeError> {
    if OBJECT.is_empty() {
        return Err(ProbeError::NoObject);
    }
    loader.load(OBJECT).map_err(|e| {
        if is_permission_error(&e) {
            ProbeError::NotPermitted {
                source: Box::new(e),
            }
        } else {
            ProbeError::Load(Box::new(e))
        }
    })
}

pub(crate) fn is_permission_error(e: &aya::EbpfError) -> bool {
    let text = format!("{e:?}");
    text.contains("EPERM")
        || text.contains("PermissionDenied")
        || text.contains("Operation not permitted")
}

/// The loaded, attached ledger and its maps.
pub struct Ledger {
    // Field order is drop order: maps first, then the object whose drop
    // detaches the programs.
    pub(crate) threads: HashMap<MapData, u32, ThreadAccount>,
    /// The accounts indexed by tid, where they are kept there (capacity.rs
    /// `tid_slots`); `threads` is then empty.
    pub(crate) slots: Option<Array<MapData, ThreadAccount>>,
    /// The same slots mapped read-only, when the kernel allowed it.
    pub(crate) slot_view: Option<slots::SlotView<ThreadAccount>>,
    pub(crate) cpus: Array<MapData, CpuAccount>,
    pub(crate) disk: Array<MapData, DiskAccount>,
    pub(crate) proc_disk: HashMap<MapData, u32, ProcDisk>,
    /// The own-I/O clocks indexed by tgid, where the thread accounts are
    /// indexed by tid; `proc_disk` is then empty.
    pub(crate) proc_slots: Option<Array<MapData, ProcDisk>>,
    /// The same slots mapped read-only, when the kernel allowed it.
    pub(crate) proc_view: Option<slots::SlotView<ProcDisk>>,
    pub(crate) stats: PerCpuArray<MapData, u64>,
    /// The exit records, drained by their own thread (exits.rs).
    pub(crate) exits: exits::ExitDrain,
    /// The `--trace` maps, when the ledger was loaded with tracing on.
    pub(crate) trace: Option<TraceMaps>,
    /// The blame detail, in blame mode only.
    detail: Option<detail::DetailMaps>,
    /// The per-CPU interrupt clocks, with `--irq-time` only.
    pub(crate) irq: Option<PerCpuArray<MapData, IrqClock>>,
    _ebpf: Ebpf,
    /// CLOCK_MONOTONIC ns when every program was attached.
    pub ready_ns: u64,
    /// How many thread accounts the ledger holds: THREADS' size, or with
    /// accounts indexed by tid, pid_max (capacity.rs); 1 where no ledger
    /// program runs (`AttachOptions::no_ledger_programs`).
    pub thread_capacity: u32,
    /// The thread that samples the kernel's BPF run-time statistics in
    /// short windows (cost.rs), or why they are not measured.
    bpf_stats: Result<cost::CostSampler, cost::CostUnavailable>,
    /// Whether `sched_wakeup` is loaded, i.e. `wake_latency_ns` measured.
    wake_hook: bool,
}

impl Ledger {
    /// Loads and attaches the ledger programs. Raising RLIMIT_MEMLOCK is
    /// attempted but not required (kernels ≥ 5.11 charge BPF memory to the
    /// memory cgroup instead).
    pub fn attach() -> Result<Self, ProbeError> {
        Self::attach_with(&AttachOptions::default())
    }

    /// The ledger plus the blame detail (per-CPU splits, disk I/O per
    /// device, memory stalls; ttp-ebpf/src/detail.rs), for `blame`. Parts of
    /// the detail this kernel cannot run are left out and listed in
    /// [`Ledger::detail_availability`]. With the wake-up hook: a thread
    /// woken before a window's edge and still waiting for a CPU at it is
    /// runnable in the ledger from its wake-up, so the edge charges its wait
    /// up to there; without the hook it still shows asleep at the edge and
    /// its whole wait lands in the window of its switch-in (seen beside two
    /// CPU burners: 57.5 ms of run-queue wait in a 49.8 ms window).
    pub fn attach_blame() -> Result<Self, ProbeError> {
        Self::load(
            &AttachOptions {
                wake_latency: true,
                ..Default::default()
            },
            true,
        )
    }

    /// Loads and attaches the ledger, and with `options.trace` the per-event
    /// stream of `--trace` (nothing is traced until
    /// [`Ledger::trace_process`] names a process).
    pub fn attach_with(options: &AttachOptions) -> Result<Self, ProbeError> {
        Self::load(options, false)
    }

    fn load(options: &AttachOptions, blame: bool) -> Result<Self, ProbeError> {
        if OBJECT.is_empty() {
            return Err(ProbeError::NoObject);
        }
        raise_memlock();
        // The statistics are on only in the sampler's windows, which begin
        // once the first cost snapshot names the programs.
        let bpf_stats = if options.no_bpf_stats {
            Err(cost::CostUnavailable(
                "not measured (the kernel's BPF statistics cost every program run; `cargo xtask bench statements` measures the programs)".into(),
            ))
        } else {
            cost::CostSampler::start()
        };
        let t = std::time::Instant::now();
        // aya's parse of the kernel BTF (needed to attach tp_btf programs)
        // runs while the offsets are resolved and the maps are created.
        let aya_btf = std::thread::spawn(aya::Btf::from_sys_fs);
        let kbtf = btf::KernelBtf::load()?;
        let mut globals = kbtf.ledger_offsets()?.globals;
        if options.trace {
            globals.extend(kbtf.trace_offsets()?.globals);
            globals.push(("TRACE_ON", 1));
        }
        let wake_hook = options.wake_hook();
        globals.push(("WAKE_HOOK", wake_hook as u32));
        globals.push(("IRQ_ON", u32::from(options.irq_time)));
        if let Some(postmaster) = options.statements_of {
            globals.push(("STMT_POSTMASTER", postmaster));
            globals.push((
                "STMT_OFF_REAL_PARENT",
                kbtf.field("task_struct", &["real_parent"])?.byte,
            ));
            if options.statements_socket.is_none() {
                // USDT boundaries: a record a statement.
                globals.push(("STMT_EACH", 1));
            }
            if let Some(socket) = &options.statements_socket {
                globals.push((
                    "STMT_OFF_PCOUNT",
                    kbtf.field("task_struct", &["sched_info", "pcount"])?.byte,
                ));
                globals.push((
                    "STMT_OFF_EXIT_CODE",
                    kbtf.field("task_struct", &["exit_code"])?.byte,
                ));
                globals.push(("STMT_LEDGER", u32::from(!options.no_ledger_programs)));
                globals.push(("STMT_EACH", u32::from(socket.each)));
                globals.push(("STMT_KEY_BY", socket.key_by));
                globals.push(("STMT_SUMS_ON", u32::from(socket.sums)));
                globals.push(("STMT_FINGERPRINT", u32::from(socket.fingerprint)));
                if let Some(s) = &socket.status {
                    globals.push(("STMT_HAVE_STATUS", 1));
                    globals.push(("STMT_OFF_STATE", s.layout.state));
                    globals.push(("STMT_OFF_ACTIVITY", s.layout.activity));
                    globals.push(("STMT_OFF_QUERY_ID", s.layout.query_id));
                    globals.push(("STMT_OFF_PLAN_ID", s.layout.plan_id.unwrap_or(0)));
                    globals.push(("STMT_OFF_ACTIVITY_START", s.layout.activity_start));
                    globals.push(("STMT_STATE_SHIFT", s.layout.state_shift));
                }
            }
        }
        let plan = blame.then(|| detail::Plan::new(kbtf.detail_offsets()));
        log::debug!("offsets from BTF in {:?}", t.elapsed());
        let beentry = options
            .statements_socket
            .and_then(|s| s.status)
            .map(|s| s.entry_global);
        let request_slots = options.request_slot_bits.map(|b| 1u32 << b.min(12));
        if let Some(n) = request_slots {
            globals.push(("REQUEST_SLOT_MASK", n - 1));
        }
        let mut loader = EbpfLoader::new();
        for (name, value) in &globals {
            loader.override_global(name, value, true);
        }
        if let Some(entry_global) = &beentry {
            loader.override_global("STMT_BEENTRY", entry_global, true);
        }
        if let Some(n) = request_slots {
            loader.map_max_entries("REQUEST_SLOTS", n);
        }
        if !options.trace {
            // Ring buffers are allocated at load: one page when unused.
            loader.map_max_entries(trace::EVENTS_MAP, exits::page_size());
        }
        // vprofile loads the object with a loader of its own
        // (ttp-vprofile/src/uprobe.rs): here its ring (4 MiB, zeroed at
        // load) and its preallocated thread map (8 MB) are never used.
        loader.map_max_entries("VPROF_RECORDS", exits::page_size());
        loader.map_max_entries("VPROF_THREADS", 1);
        let tid_slots = capacity::tid_slots(capacity::pid_max(), options.max_threads, blame);
        let thread_capacity = match tid_slots {
            Some(n) => {
                loader.map_max_entries("THREAD_SLOTS", n);
                // The processes' own-I/O clocks by tgid, likewise.
                loader.map_max_entries("PROC_SLOTS", n);
                // The hashes are unused: their smallest size.
                loader.map_max_entries("THREADS", 1);
                loader.map_max_entries("PROC_DISK", 1);
                loader.override_global("TID_INDEXED", &1u32, true);
                n
            }
            None => {
                let n = capacity::thread_map_entries(
                    capacity::threads_max(),
                    capacity::live_threads(),
                    options.max_threads,
                );
                loader.map_max_entries("THREADS", n);
                n
            }
        };
        let thread_capacity = if options.no_ledger_programs {
            // No ledger program runs: nothing writes these maps, yet the
            // arrays and REQUESTS are allocated whole at load (up to 16 MiB
            // of thread slots, 256 B a tid up to pid_max 2¹⁶): their
            // smallest sizes.
            for map in LEDGER_ONLY_MAPS {
                loader.map_max_entries(map, 1);
            }
            1
        } else {
            thread_capacity
        };
        if !options.trace {
            // Looked up only while tracing, preallocated at load.
            loader.map_max_entries(trace::TRACED_MAP, 1);
        }
        let exit_ring_bytes = options
            .exit_ring_bytes
            .unwrap_or_else(|| exits::ring_bytes(exits::DESIGN_EXIT_RATE, exits::DESIGN_STALL_MS));
        loader.map_max_entries("EXITS", exit_ring_bytes);
        if options.statements_of.is_none() {
            // Allocated at load: the smallest sizes when unused.
            loader.map_max_entries("STMT_RECORDS", exits::page_size());
            loader.map_max_entries("STMT_THREADS", 1);
            loader.map_max_entries("STMT_TRANCHES", 1);
        }
        if options.statements_socket.is_some_and(|s| !s.each) {
            // Sums only: no record a statement (parallel workers' shares
            // are summed into their leaders' statements too).
            loader.map_max_entries("STMT_RECORDS", exits::page_size());
        }
        if options.statements_socket.is_some_and(|s| s.sums) {
            // The statement keys and `other`, and a text of each.
            loader.map_max_entries("STMT_SUMS", statements::sum_keys() + 1);
            loader.map_max_entries("STMT_TEXTS", statements::text_ring_bytes());
        } else {
            loader.map_max_entries("STMT_SUMS", 1);
            loader.map_max_entries("STMT_TEXTS", exits::page_size());
        }
        match &plan {
            Some(p) => p.configure(&mut loader),
            None => detail::shrink_maps(&mut loader),
        }
        let mut ebpf = load_object(&mut loader)?;
        log::debug!("object loaded (maps created) at {:?}", t.elapsed());
        let btf = aya_btf
            .join()
            .map_err(|_| ProbeError::BadBtf {
                path: btf::VMLINUX_BTF.into(),
                reason: "the BTF parser panicked".into(),
            })?
            .map_err(|e| ProbeError::BadBtf {
                path: btf::VMLINUX_BTF.into(),
                reason: e.to_string(),
            })?;
        log::debug!("aya BTF ready at {:?}", t.elapsed());
        if !options.no_ledger_programs {
            for (program, tracepoint) in LEDGER_PROGRAMS {
                attach_program(&mut ebpf, &btf, program, tracepoint)?;
                log::debug!("{program} loaded and attached at {:?}", t.elapsed());
            }
        }
        if options.statements_socket.is_some() {
            for (program, tracepoint) in STATEMENTS_SOCKET_PROGRAMS {
                attach_program(&mut ebpf, &btf, program, tracepoint)?;
            }
        }
        if wake_hook {
            attach_program(&mut ebpf, &btf, WAKEUP_PROGRAM, "sched_wakeup")?;
        }
        if options.irq_time {
            for (program, tracepoint) in IRQ_PROGRAMS {
                attach_program(&mut ebpf, &btf, program, tracepoint)?;
            }
            // x86 only: elsewhere the local timer's time stays in the
            // on-CPU time without interrupts (docs/ttpv2.md).
            for (program, tracepoint) in IRQ_TIMER_PROGRAMS {
                if let Err(e) = attach_program(&mut ebpf, &btf, program, tracepoint) {
                    log::warn!("local timer not in the interrupt time: {e}");
                    break;
                }
            }
        }
        let trace = if options.trace {
            Some(trace::attach(&mut ebpf, &btf)?)
        } else {
            None
        };
        let detail = match plan {
            Some(plan) => {
                let availability = attach_detail(&mut ebpf, &btf, plan);
                Some(detail::DetailMaps::take(&mut ebpf, availability)?)
            }
            None => None,
        };
        let ready_ns = ttp_sys::sys::clock::monotonic_ns();
        let slots: Option<Array<MapData, ThreadAccount>> = tid_slots
            .is_some()
            .then(|| take(&mut ebpf, "THREAD_SLOTS"))
            .transpose()?;
        let proc_slots: Option<Array<MapData, ProcDisk>> = tid_slots
            .is_some()
            .then(|| take(&mut ebpf, "PROC_SLOTS"))
            .transpose()?;
        Ok(Self {
            threads: take(&mut ebpf, "THREADS")?,
            slot_view: slots.as_ref().and_then(|a| {
                slots::SlotView::map(a)
                    .inspect_err(|e| log::debug!("THREAD_SLOTS not mapped ({e}): read by bpf(2)"))
                    .ok()
            }),
            slots,
            cpus: take(&mut ebpf, "CPUS")?,
            disk: take(&mut ebpf, "DISK")?,
            proc_disk: take(&mut ebpf, "PROC_DISK")?,
            proc_view: proc_slots.as_ref().and_then(|a| {
                slots::SlotView::map(a)
                    .inspect_err(|e| log::debug!("PROC_SLOTS not mapped ({e}): read by bpf(2)"))
                    .ok()
            }),
            proc_slots,
            stats: take(&mut ebpf, "STATS")?,
            exits: exits::ExitDrain::start(
                take(&mut ebpf, "EXITS")?,
                exit_ring_bytes,
                options.fixed_exit_queue,
            ),
            trace,
            detail,
            irq: if options.irq_time {
                Some(take(&mut ebpf, "IRQ_CLOCK")?)
            } else {
                None
            },
            _ebpf: ebpf,
            ready_ns,
            thread_capacity,
            bpf_stats,
            wake_hook,
        })
    }

    /// The loaded object, for programs that share the ledger's maps (the
    /// `statements` uprobes read the thread accounts).
    pub(crate) fn object_mut(&mut self) -> &mut Ebpf {
        &mut self._ebpf
    }

    /// Whether `wake_latency_ns` is measured (the wake-up hook is loaded):
    /// without it the accounts' field holds no defined measure and reports
    /// show it as not taken.
    pub fn wake_latency_measured(&self) -> bool {
        self.wake_hook
    }

    /// Whether `irq_ns` is measured (`--irq-time`: the interrupt programs
    /// are loaded); without them the field holds no measure and reports
    /// leave it out.
    pub fn irq_time_measured(&self) -> bool {
        self.irq.is_some()
    }

    /// Size in bytes of a loaded program as the verifier left it (what
    /// every event it handles runs, before JIT); `None` if not loaded.
    pub fn program_xlated_bytes(&self, program: &str) -> Option<u32> {
        self._ebpf.program(program)?.info().ok()?.size_translated()
    }
}

fn attach_program(
    ebpf: &mut Ebpf,
    btf: &aya::Btf,
    program: &str,
    tracepoint: &str,
) -> Result<(), ProbeError> {
    let prog_err = |source| ProbeError::Program {
        program: program.into(),
        tracepoint: tracepoint.into(),
        source: Box::new(source),
    };
    let prog: &mut BtfTracePoint = ebpf
        .program_mut(program)
        .ok_or_else(|| ProbeError::MissingProgram {
            program: program.into(),
        })?
        .try_into()
        .map_err(prog_err)?;
    prog.load(tracepoint, btf).map_err(prog_err)?;
    if log::log_enabled!(log::Level::Debug) {
        let verified = prog
            .info()
            .ok()
            .and_then(|i| i.verified_instruction_count());
        log::debug!("{program}: {verified:?} instructions verified");
    }
    prog.attach().map_err(prog_err)?;
    Ok(())
}

/// Attaches the detail programs this kernel supports. A part whose program
/// fails (its tracepoint is not in this kernel, e.g. no CONFIG_COMPACTION)
/// is marked unavailable, with the reason, instead of failing the command.
fn attach_detail(
    ebpf: &mut Ebpf,
    btf: &aya::Btf,
    plan: detail::Plan,
) -> detail::DetailAvailability {
    let mut avail = detail::DetailAvailability {
        notes: plan.notes.clone(),
        ..Default::default()
    };
    let mut failed = Vec::new();
    for (program, tracepoint, part) in detail::DETAIL_PROGRAMS {
        if plan.skip.contains(part) || failed.contains(part) {
            continue;
        }
        match attach_program(ebpf, btf, program, tracepoint) {
            Ok(()) => avail.set(*part, true),
            Err(e) => {
                log::warn!("{e:#}");
                avail.notes.push(format!("{tracepoint} not attached: {e}"));
                avail.set(*part, false);
                failed.push(*part);
            }
        }
    }
    avail
}

/// What to load besides the ledger.
#[derive(Debug, Clone, Copy, Default)]
pub struct AttachOptions {
    /// The per-event stream of `--trace`.
    pub trace: bool,
    /// Size of the thread-account map instead of the one chosen from
    /// threads-max (capacity.rs).
    pub max_threads: Option<u32>,
    /// The `statements` maps at full size, for the backends of this
    /// postmaster (their uprobe program reads the thread accounts, so it
    /// loads with the ledger).
    pub statements_of: Option<u32>,
    /// With `statements_of`: the statements' boundaries from the client
    /// socket (wire.rs), instead of the USDT probes.
    pub statements_socket: Option<SocketStatements>,
    /// Leave the ledger's own programs (scheduler, CPU, block) unattached:
    /// `statements` without `--ledger`, so that no other process of the
    /// machine pays for them.
    pub no_ledger_programs: bool,
    /// Never switch the kernel's BPF statistics on, not even in sampling
    /// windows: the probes' cost is then not in the report.
    pub no_bpf_stats: bool,
    /// Size in bytes of the exit-record ring instead of the one sized for
    /// `attach --all` (exits.rs, [`exits::ring_bytes`]); a power of two of
    /// at least a page.
    pub exit_ring_bytes: Option<u32>,
    /// Load the wake-up hook (`sched_wakeup`) so that `wake_latency_ns`,
    /// wall clock from each wake-up to the switch-in, is measured
    /// (`--wake-latency`); tracing loads it anyway.
    pub wake_latency: bool,
    /// Load the interrupt programs (`--irq-time`, ttp-ebpf/src/irq.rs) so
    /// that `irq_ns`, the interrupt time inside each thread's on-CPU
    /// time, is measured.
    pub irq_time: bool,
    /// Exit records wait in a queue of fixed size, reserved at load
    /// (exits.rs, [`exits::queue_records`]), instead of one that grows.
    pub fixed_exit_queue: bool,
    /// log2 of the slots for block requests in flight (up to 12, the
    /// default: 4 096): with fewer, more requests find their slot held and
    /// go to the overflow hash (the test of that path; ttp-ebpf/src/block.rs).
    pub request_slot_bits: Option<u32>,
}

/// What the socket programs need to know of the server.
#[derive(Debug, Clone, Copy, Default)]
pub struct SocketStatements {
    /// The backends' status entries, where they can be read.
    pub status: Option<pg_status::StatusSource>,
    /// A record a statement through the ring besides the sums
    /// (`statements --each`, serve); without it only the sums and a text a
    /// key cross to userspace (ttp-ebpf/src/sums.rs).
    pub each: bool,
    /// How the kernel keys the sums (`ttp_common::sums::key_by`).
    pub key_by: u32,
    /// Whether the kernel sums the statements at all (a reader of the
    /// records alone, serve, leaves them off).
    pub sums: bool,
    /// Whether a statement without a query id is keyed by the fingerprint
    /// the kernel computes (else by its text's hash: a server known to
    /// compute query ids).
    pub fingerprint: bool,
}

impl AttachOptions {
    /// Whether these options load `sched_wakeup`.
    pub(crate) fn wake_hook(&self) -> bool {
        self.wake_latency || self.trace
    }
}

pub fn take<T>(ebpf: &mut Ebpf, name: &str) -> Result<T, ProbeError>
where
    T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>,
{
    let map = ebpf
        .take_map(name)
        .ok_or_else(|| ProbeError::MissingMap { map: name.into() })?;
    T::try_from(map).map_err(|source| ProbeError::Map {
        map: name.into(),
        source: Box::new(source),
    })
}

fn raise_memlock() {
    let rlim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain syscall with a valid pointer. Failure (no
    // CAP_SYS_RESOURCE) is harmless on kernels that charge BPF memory to
    // memcg, so it is only logged.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &rlim) } != 0 {
        log::debug!("setrlimit(RLIMIT_MEMLOCK) failed; relying on memcg accounting");
    }
}

/// A probe error in a command: the ones the user can fix (privileges, BTF)
/// become usage errors (exit 2), the rest stay failures (exit 1).
pub fn probe_error_ctx(e: ProbeError) -> anyhow::Error {
    match e {
        ProbeError::NotPermitted { .. } | ProbeError::NoBtf { .. } => {
            ttp_sys::error::UsageError::new(e.to_string()).into()
        }
        other => anyhow::Error::new(other),
    }
}
