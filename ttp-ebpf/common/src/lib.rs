//! Record layouts shared by ttp's eBPF programs and its userspace, defined
//! once. Every type is `#[repr(C)]`, `Copy`, with padding spelled out (no
//! implicit holes, so `aya::Pod` is sound), and its size is checked at compile
//! time. `aya::Pod` impls are behind the `user` feature.
#![no_std]

/// Length of `task_struct.comm`, including the NUL.
pub const TASK_COMM_LEN: usize = 16;

/// Largest CPU id the per-CPU ledger holds (CPUs above it are counted in
/// [`stat::CPU_OUT_OF_RANGE`]).
pub const MAX_CPUS: u32 = 512;

/// Threads the ledger can hold at once (system-wide), as compiled;
/// userspace sizes the map at load from threads-max
/// (ttp-ledger/src/probe/capacity.rs).
pub const MAX_THREADS: u32 = 32768;

/// Block requests that can be in flight at once.
pub const MAX_REQUESTS: u32 = 8192;

/// Processes that can have block I/O accounted at once.
pub const MAX_IO_PROCS: u32 = 8192;

/// Bytes of the ring buffer that carries exit records, as compiled;
/// userspace sizes it at load from the exit rate it must absorb
/// (ttp-ledger/src/probe/exits.rs).
pub const EXIT_RING_BYTES: u32 = 1 << 20;

/// What a thread is doing since `ThreadAccount::state_since_ns`.
pub mod state {
    /// Not seen to change state since the ledger started: time is not
    /// attributed until the first transition.
    pub const UNKNOWN: u32 = 0;
    /// On a CPU.
    pub const RUNNING: u32 = 1;
    /// Runnable, waiting for a CPU (woken, or preempted).
    pub const RUNNABLE: u32 = 2;
    /// Interruptible sleep (S), or an idle kernel thread (TASK_IDLE), or
    /// stopped/traced.
    pub const SLEEPING: u32 = 3;
    /// Uninterruptible sleep (D) not on block I/O.
    pub const BLOCKED: u32 = 4;
    /// Blocked with `task_struct.in_iowait` set: the kernel's block-I/O delay.
    pub const IOWAIT: u32 = 5;
    /// Exited (final switch-out with TASK_DEAD); only in exit records.
    pub const DEAD: u32 = 6;
}

/// Flags in `ThreadAccount::flags`.
pub mod flag {
    /// The account was seeded by userspace from /proc (state from
    /// /proc/PID/task/TID/stat at attach time), not created by an event.
    pub const SEEDED: u32 = 1;
    /// `iowait_cpu`, `share_snap` and `own_snap` describe an open iowait
    /// interval counted in the per-CPU `nr_iowait`.
    pub const IOWAIT_COUNTED: u32 = 2;
    /// The process's own-I/O clock could not be read when the open iowait
    /// interval began (lock contended): its own-I/O time is not counted.
    pub const OWN_UNKNOWN: u32 = 4;
    /// `exec_snap_ns` and `run_delay_snap_ns` hold the kernel's counters at
    /// the last read: on-CPU and run-queue wait grow by their differences.
    pub const SCHED_SNAP: u32 = 8;
    /// `blkio_snap_lo` holds the low 32 bits of the task's delay-accounting
    /// `delays->blkio_delay` at the switch-out that began the open iowait
    /// interval (ttp-ebpf/src/sched.rs `wake_instant`).
    pub const BLKIO_SNAP: u32 = 16;
    /// `irq_snap_ns` holds the interrupt clock (`IrqClock::total_ns`) of
    /// `run_cpu` at the thread's switch-in: the open on-CPU interval's
    /// interrupt time is that clock's growth since.
    pub const IRQ_SNAP: u32 = 32;
}

/// The ledger's per-thread counters, declared once: every `u64` that only
/// grows, which userspace reads, subtracts between two images and sums over
/// a process. `ThreadAccount` and `IoAccount` below are declared from this
/// list, and userspace generates its measure types, their arithmetic, serde,
/// CSV columns and import mapping from it (`ttp-ledger/src/accounts/measures.rs`).
///
/// `for_each_ledger_counter!(callback)` expands to
/// `callback! { thread { <counters> } io { <counters> } }`, each counter with
/// its doc comment, in layout order. Adding a counter here (and counting it
/// in `ttp-ebpf/src/ledger.rs`) adds it to the kernel layout, the attach
/// JSON, the TTPv2 JSON and CSV columns, and the load ledger rows; the size
/// asserts below then need the new size (docs/architecture.md, "Adding a
/// ledger counter").
#[macro_export]
macro_rules! for_each_ledger_counter {
    ($callback:ident) => {
        $callback! {
            thread {
                /// The kernel's runtime (`se.sum_exec_runtime`, rq clock,
                /// steal left out) gained while the ledger followed the
                /// thread, read at its switches.
                on_cpu_ns,
                /// The kernel's run-queue wait (`sched_info.run_delay`)
                /// gained while the ledger followed the thread, read at its
                /// switch-outs (a wait enters it at the switch-in that ends
                /// it, so a running thread's last wait shows from its next
                /// switch-out).
                runq_wait_ns,
                /// Wall clock from a wakeup or a preemption to the switch-in.
                wake_latency_ns,
                /// Interruptible sleep (S), idle kernel threads, stopped.
                sleep_ns,
                /// Uninterruptible sleep (D) not on block I/O.
                blocked_ns,
                /// Blocked on block I/O (`in_iowait`): the delay-accounting
                /// blkio delay, TTPv2's BlockIO.
                iowait_ns,
                /// Part of `iowait_ns` during which the disk served this
                /// thread's process (shared evenly among processes with
                /// requests in service).
                iowait_own_ns,
                /// This thread's share of the machine's iowait: idle CPU time
                /// while it was in iowait, each interval split evenly among
                /// the tasks in iowait on that CPU.
                iowait_share_ns,
                /// Switches out while not runnable.
                voluntary_switches,
                /// Switches out while runnable (preempted).
                involuntary_switches,
                /// Times it was woken.
                wakeups,
                /// Part of `on_cpu_ns` the CPU spent in hard and soft
                /// interrupt handlers (`irq:irq_handler_*`,
                /// `irq:softirq_*`) between the thread's switch-in and
                /// switch-out: this kernel charges them to the task they
                /// interrupt. Measured only with the interrupt programs
                /// loaded (`--irq-time`).
                irq_ns,
            }
            io {
                read_requests,
                read_bytes,
                write_requests,
                write_bytes,
                /// Sum over its requests of issue → completion (time on the
                /// device).
                device_ns,
                /// Sum over its requests of start → issue (time queued in the
                /// block layer).
                queue_ns,
            }
        }
    };
}

/// Declares `IoAccount` and `ThreadAccount` from the counter list.
macro_rules! declare_accounts {
    (
        thread { $( $(#[$tm:meta])* $t:ident, )* }
        io { $( $(#[$im:meta])* $i:ident, )* }
    ) => {
        /// Block I/O a thread submitted.
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct IoAccount {
            $( $(#[$im])* pub $i: u64, )*
        }

        /// Where one thread's time went, aggregated in the kernel.
        ///
        /// Keyed by tid in the `THREADS` map; `start_time_ns`
        /// (task_struct.start_time) tells a reused tid from its predecessor.
        /// Closed intervals are in the `*_ns` fields; the open one is `state`
        /// since `state_since_ns`, which a reader closes "as of now". The
        /// counters are declared by [`for_each_ledger_counter`].
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct ThreadAccount {
            pub tid: u32,
            pub tgid: u32,
            /// tgid of the forking process when the thread was created while
            /// the ledger ran; 0 when unknown.
            pub parent_tgid: u32,
            pub state: u32,
            /// task_struct.start_time: CLOCK_MONOTONIC ns at fork.
            pub start_time_ns: u64,
            /// CLOCK_MONOTONIC ns when the ledger first saw the thread.
            pub first_seen_ns: u64,
            pub state_since_ns: u64,
            $( $(#[$tm])* pub $t: u64, )*
            pub io: IoAccount,
            /// CPU whose `nr_iowait` counts this thread's open iowait interval.
            pub iowait_cpu: u32,
            pub flags: u32,
            /// Per-CPU `share_cum_ns` when the open iowait interval began.
            pub share_snap: u64,
            /// The process's own-I/O clock when the open iowait interval began.
            pub own_snap: u64,
            /// The kernel's `se.sum_exec_runtime` of the thread at the last
            /// read (valid with [`flag::SCHED_SNAP`]).
            pub exec_snap_ns: u64,
            /// The kernel's `sched_info.run_delay` at the last read (valid
            /// with [`flag::SCHED_SNAP`]).
            pub run_delay_snap_ns: u64,
            /// CPU of its last seen switch-in: a reader counts the open
            /// on-CPU interval only while that CPU still shows the thread
            /// current.
            pub run_cpu: u32,
            /// Low 32 bits of `delays->blkio_delay` when the open iowait
            /// interval began (valid with [`flag::BLKIO_SNAP`]): the growth
            /// at the switch-in, taken modulo 2^32 ns and placed in the
            /// interval, is when the wait ended.
            pub blkio_snap_lo: u32,
            /// `IrqClock::total_ns` of `run_cpu` at the switch-in (valid
            /// with [`flag::IRQ_SNAP`]).
            pub irq_snap_ns: u64,
            pub comm: [u8; TASK_COMM_LEN],
        }

        impl ThreadAccount {
            pub const fn zeroed() -> Self {
                Self {
                    tid: 0,
                    tgid: 0,
                    parent_tgid: 0,
                    state: state::UNKNOWN,
                    start_time_ns: 0,
                    first_seen_ns: 0,
                    state_since_ns: 0,
                    $( $t: 0, )*
                    io: IoAccount { $( $i: 0, )* },
                    iowait_cpu: 0,
                    flags: 0,
                    share_snap: 0,
                    own_snap: 0,
                    exec_snap_ns: 0,
                    run_delay_snap_ns: 0,
                    run_cpu: 0,
                    blkio_snap_lo: 0,
                    irq_snap_ns: 0,
                    comm: [0; TASK_COMM_LEN],
                }
            }
        }
    };
}

for_each_ledger_counter!(declare_accounts);

/// The final account of a thread, sent through the ring buffer at its last
/// switch-out.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitRecord {
    /// CLOCK_MONOTONIC ns of the final switch-out.
    pub exit_ns: u64,
    pub account: ThreadAccount,
}

/// The kernel's spin lock of a map value (`struct bpf_spin_lock`, uapi
/// bpf.h). The verifier finds it in the value's BTF by this name, as a
/// field of the value itself; programs take it with the `bpf_spin_lock`
/// helper, which spins until it holds it (interrupts off meanwhile), so an
/// update is never skipped. Userspace reads of the value see it zeroed.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct bpf_spin_lock {
    pub val: u32,
}

/// One CPU's busy / idle / iowait time, computed as /proc/stat does: idle
/// time while tasks that went to sleep on this CPU are in iowait is iowait.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuAccount {
    /// The kernel's `bpf_spin_lock`: the account is also updated from other
    /// CPUs (the end of an iowait wait books the CPU it was counted on).
    /// Taken, never given up (ttp-ebpf/src/lock.rs).
    pub lock: bpf_spin_lock,
    pub _lock_pad: u32,
    /// Tasks in iowait that went to sleep on this CPU (the kernel's
    /// rq->nr_iowait, for tasks the ledger saw go to sleep). Changed only
    /// by atomic adds (a switch-out on the busy CPU adds without the
    /// lock); 64-bit because the BPF target's fetching atomics are.
    pub nr_iowait: u64,
    /// 1 while the CPU is in its idle state: from a `power:cpu_idle` entry
    /// to its exit (PWR_EVENT_EXIT), the stretch the kernel's idle clock
    /// covers (docs/ledger.md).
    pub idle: u32,
    /// 1 once the first event set `idle` and `since_ns`.
    pub valid: u32,
    /// The task last seen switched in on this CPU (0: idle).
    pub current_tid: u32,
    /// 1 once a switch set `current_tid`.
    pub switch_seen: u32,
    /// When that switch was seen.
    pub last_switch_ns: u64,
    pub since_ns: u64,
    pub busy_ns: u64,
    pub idle_ns: u64,
    pub iowait_ns: u64,
    /// ∫ (idle ∧ nr_iowait > 0) / nr_iowait dt: each task in iowait on this
    /// CPU accrues the increase of this clock while it waits.
    pub share_cum_ns: u64,
    /// The ledger's clock less this CPU's run-queue clock: places a
    /// wake-up whose clock update the kernel skipped (ttp-ebpf/src/sched.rs
    /// `wake_instant`). Written only by this CPU's `sched_switch`.
    pub clock_off: ClockOffset,
    /// More than a cache line between two CPUs' fields wherever the array's
    /// values start, so that no line holds fields of two CPUs (each CPU
    /// writes its own at every switch and idle event).
    pub _pad: [u64; 12],
}

/// CLOCK_MONOTONIC less a CPU's run-queue clock (`rq->clock`,
/// sched_clock's domain), wrapping, taken at the switch-ins that end a
/// sleep with `rq->clock` past the task's `last_queued`. Each such sample is
/// the offset plus the time since the clock's last update, never less: the
/// smallest sample of the last [`ClockOffset::HORIZON_NS`] is kept, and a
/// sample older than that gives way to the next (the two clocks drift
/// apart slowly: 80 ns in 5 s on this VM's TSC).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClockOffset {
    /// The offset, wrapping (compared as signed).
    pub off_ns: u64,
    /// When it was taken (CLOCK_MONOTONIC); 0: none yet.
    pub at_ns: u64,
}

impl ClockOffset {
    pub const HORIZON_NS: u64 = 1_000_000_000;

    /// Takes the sample `now − clock` if it is the smallest of the horizon.
    #[inline(always)]
    pub fn sample(&mut self, now: u64, clock: u64) {
        let s = now.wrapping_sub(clock);
        if self.at_ns == 0
            || (s as i64) <= (self.off_ns as i64)
            || now.saturating_sub(self.at_ns) > Self::HORIZON_NS
        {
            self.off_ns = s;
            self.at_ns = now;
        }
    }

    /// The instant in CLOCK_MONOTONIC of the run-queue clock's `clock`,
    /// None before any sample.
    #[inline(always)]
    pub fn monotonic(&self, clock: u64) -> Option<u64> {
        (self.at_ns != 0).then(|| clock.wrapping_add(self.off_ns))
    }
}

/// One CPU's interrupt clock (a per-CPU map, loaded with `--irq-time`):
/// the time its hard and soft interrupt handlers ran, from the outermost
/// handler's entry tracepoint to its exit (`irq:irq_handler_entry/exit`,
/// `irq:softirq_entry/exit`); a handler inside another (a hard interrupt
/// during a softirq) is inside the outer one's time, counted once.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrqClock {
    /// Interrupt time so far.
    pub total_ns: u64,
    /// Part of `total_ns` whose outermost handler was a softirq.
    pub soft_ns: u64,
    /// When the outermost running handler entered.
    pub entry_ns: u64,
    /// Handlers running (nested), 0 outside interrupts.
    pub depth: u32,
    /// 1 while the outermost running handler is a softirq.
    pub outer_soft: u32,
    /// Hard interrupt handler runs seen (irq_handler_entry, and
    /// local_timer_entry where it is loaded).
    pub hard_count: u64,
    /// Softirq runs seen (softirq_entry), as /proc/softirqs counts them.
    pub soft_count: u64,
}

/// The machine's "whose I/O is the disk serving" clock.
///
/// `g_cum_ns` = ∫ 1/n(t) dt over the time some process has a request in
/// service, n(t) being the number of such processes. A process accrues
/// own-I/O time at rate 1/n while it has requests in service.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskAccount {
    /// The kernel's `bpf_spin_lock` (see [`CpuAccount::lock`]).
    pub lock: bpf_spin_lock,
    pub _lock_pad: u32,
    /// Processes with at least one request in service.
    pub busy_procs: u32,
    pub _pad: u32,
    pub last_ns: u64,
    pub g_cum_ns: u64,
    /// Time with at least one request in service.
    pub busy_ns: u64,
}

/// A process's own-I/O clock (see [`DiskAccount`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcDisk {
    /// Its requests in service.
    pub inflight: u32,
    /// Non-zero once its main thread exited with requests still in
    /// service: the entry is forgotten when the last of them ends.
    pub gone: u32,
    /// `g_cum_ns` when `inflight` last went from 0 to 1.
    pub g_snap_ns: u64,
    /// Own-I/O time accrued over closed in-service periods.
    pub own_cum_ns: u64,
    /// The process this entry belongs to: a hash entry removed and taken
    /// again by another process between a program's lookup and its lock
    /// is told apart (ttp-ebpf/src/block.rs).
    pub tgid: u32,
    pub _pad: u32,
}

/// A block request from creation to completion.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub tid: u32,
    pub tgid: u32,
    pub thread_start_ns: u64,
    pub start_ns: u64,
    /// 0 until issued to the driver.
    pub issue_ns: u64,
}

/// Indices of the kernel-side counters (a per-CPU array of u64): failures
/// and losses are counted, never hidden.
pub mod stat {
    /// Exit records that did not fit in the ring buffer.
    pub const EXIT_RECORD_LOST: u32 = 0;
    /// Thread accounts that could not be created (map full).
    pub const THREAD_MAP_FULL: u32 = 1;
    /// Reads of kernel memory that failed.
    pub const READ_FAILED: u32 = 2;
    /// Updates skipped because a ledger lock stayed contended. The locks
    /// are the kernel's `bpf_spin_lock` since, which never gives up: kept
    /// (always 0 from this build on) so that older records still read.
    pub const LOCK_CONTENDED: u32 = 3;
    /// Block requests that could not be tracked (map full).
    pub const REQUEST_MAP_FULL: u32 = 4;
    /// Processes whose own-I/O clock could not be created (map full).
    pub const PROC_DISK_MAP_FULL: u32 = 5;
    /// Events from a CPU id at or above MAX_CPUS.
    pub const CPU_OUT_OF_RANGE: u32 = 6;
    /// sched_switch events seen.
    pub const SWITCHES: u32 = 7;
    /// With the wake-up hook loaded (`--wake-latency`, `trace`): wake-ups
    /// it did not see — a thread first seen at its wake-up (its sleep is
    /// unknown), or a switch-in from a sleep whose wake-up never reached
    /// the hook (its wait ends at the switch-in). Without the hook every
    /// sleep ends at its switch-in by design, and nothing is counted here.
    pub const WAKEUP_UNSEEN: u32 = 8;
    /// Exit records sent.
    pub const EXIT_RECORDS: u32 = 9;
    /// Trace events that did not fit in the trace ring buffer.
    pub const TRACE_EVENT_LOST: u32 = 10;
    /// Trace events sent.
    pub const TRACE_EVENTS: u32 = 11;
    /// Processes forked by a traced parent that could not be traced (the
    /// `TRACED` map was full).
    pub const TRACED_MAP_FULL: u32 = 12;
    /// Switch-outs of a task that was not the last one seen switched in on
    /// that CPU: a gap in the ledger's view of the CPU.
    pub const UNREPORTED_SWITCH: u32 = 13;
    /// Switches of a thread whose previous switch (in or out) the ledger
    /// did not see: its on-CPU time since the last seen switch was taken
    /// from the kernel's `sum_exec_runtime` (docs/ledger.md).
    pub const SWITCH_UNSEEN: u32 = 14;
    /// Block requests still in service when their `struct request` was
    /// reused: their completion never reached `block_io_done`, and they
    /// were ended at the reuse
    /// (docs/ledger.md, "Requests that never report their end").
    pub const REQUEST_END_AT_REUSE: u32 = 15;
    /// Runs of the ledger's other programs (`sched_switch`'s are
    /// [`SWITCHES`]): the kernel counts a program's runs only while its BPF
    /// statistics are on, which ttp keeps to short sampling windows
    /// (ttp-ledger/src/probe/cost.rs), so the ledger counts them itself.
    pub const RUNS_WAKEUP: u32 = 16;
    pub const RUNS_WAKEUP_NEW: u32 = 17;
    pub const RUNS_FORK: u32 = 18;
    pub const RUNS_EXEC: u32 = 19;
    pub const RUNS_CPU_IDLE: u32 = 20;
    pub const RUNS_BIO_QUEUE: u32 = 21;
    pub const RUNS_IO_START: u32 = 22;
    pub const RUNS_RQ_ISSUE: u32 = 23;
    pub const RUNS_IO_DONE: u32 = 24;
    /// With `--irq-time`: runs whose interrupt clock grew by more than the
    /// runtime the run gained, cut to it (`ThreadAccount::take_irq_clock`):
    /// the hypervisor stole time inside a handler, or a switch never
    /// reached the tracepoint.
    pub const IRQ_CAPPED: u32 = 25;
    /// Block requests kept in the overflow hash because another request in
    /// flight held their slot (ttp-ebpf/src/block.rs): not a loss.
    pub const REQUEST_OVERFLOW: u32 = 26;
    pub const COUNT: u32 = 27;

    /// The counter of a program's runs, by the program's name.
    pub fn runs_of(program: &str) -> Option<u32> {
        Some(match program {
            "sched_switch" => SWITCHES,
            "sched_wakeup" => RUNS_WAKEUP,
            "sched_wakeup_new" => RUNS_WAKEUP_NEW,
            "sched_process_fork" => RUNS_FORK,
            "sched_process_exec" => RUNS_EXEC,
            "cpu_idle" => RUNS_CPU_IDLE,
            "block_bio_queue" => RUNS_BIO_QUEUE,
            "block_io_start" => RUNS_IO_START,
            "block_rq_issue" => RUNS_RQ_ISSUE,
            "block_io_done" => RUNS_IO_DONE,
            _ => return None,
        })
    }
}

const _: () = assert!(core::mem::size_of::<IoAccount>() == 48);
const _: () = assert!(core::mem::size_of::<ThreadAccount>() == 256);
const _: () = assert!(core::mem::size_of::<ExitRecord>() == 264);
const _: () = assert!(core::mem::size_of::<IrqClock>() == 48);
const _: () = assert!(core::mem::size_of::<CpuAccount>() == 192);
const _: () = assert!(core::mem::size_of::<DiskAccount>() == 40);
const _: () = assert!(core::mem::size_of::<bpf_spin_lock>() == 4);
const _: () = assert!(core::mem::size_of::<ProcDisk>() == 32);
const _: () = assert!(core::mem::size_of::<RequestInfo>() == 32);

#[cfg(feature = "user")]
mod pod {
    use super::*;
    // SAFETY: each type is repr(C), Copy, and has no implicit padding (the
    // size asserts above pin the layouts), so any byte pattern is valid.
    unsafe impl aya::Pod for IoAccount {}
    unsafe impl aya::Pod for ThreadAccount {}
    unsafe impl aya::Pod for ExitRecord {}
    unsafe impl aya::Pod for CpuAccount {}
    unsafe impl aya::Pod for DiskAccount {}
    unsafe impl aya::Pod for IrqClock {}
    unsafe impl aya::Pod for ProcDisk {}
    unsafe impl aya::Pod for RequestInfo {}
    unsafe impl aya::Pod for trace::Header {}
    unsafe impl aya::Pod for trace::Switch {}
    unsafe impl aya::Pod for trace::Wakeup {}
    unsafe impl aya::Pod for trace::Block {}
    unsafe impl aya::Pod for trace::Proc {}
    unsafe impl aya::Pod for trace::CpuSample {}
}

// ---- detail: blame's splits, kept only when `blame` enables them ----
pub mod detail;

// ---- trace: the per-event stream of `--trace` ----
pub mod trace;

// ---- clocks: the one rule that brings the ledger's clocks up to an instant ----
pub mod clocks;

// ---- vprof: uprobe records of `vprofile` (VProfiler, paper 004) ----
pub mod vprofile;

// ---- statements: PostgreSQL statements through its USDT probes ----
pub mod statements;

// ---- statement sums: `statements` summed per key in the kernel ----
pub mod sums;

/// The statement fingerprint as a hash, a byte at a time.
pub mod fingerprint;
