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

/// Threads the ledger can hold at once (system-wide).
pub const MAX_THREADS: u32 = 32768;

/// Block requests that can be in flight at once.
pub const MAX_REQUESTS: u32 = 8192;

/// Processes that can have block I/O accounted at once.
pub const MAX_IO_PROCS: u32 = 8192;

/// Bytes of the ring buffer that carries exit records.
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
}

/// Block I/O a thread submitted.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoAccount {
    pub read_requests: u64,
    pub read_bytes: u64,
    pub write_requests: u64,
    pub write_bytes: u64,
    /// Sum over its requests of issue → completion (time on the device).
    pub device_ns: u64,
    /// Sum over its requests of start → issue (time queued in the block layer).
    pub queue_ns: u64,
}

/// Where one thread's time went, aggregated in the kernel.
///
/// Keyed by tid in the `THREADS` map; `start_time_ns` (task_struct.start_time)
/// tells a reused tid from its predecessor. Closed intervals are in the
/// `*_ns` fields; the open one is `state` since `state_since_ns`, which a
/// reader closes "as of now".
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadAccount {
    pub tid: u32,
    pub tgid: u32,
    /// tgid of the forking process when the thread was created while the
    /// ledger ran; 0 when unknown.
    pub parent_tgid: u32,
    pub state: u32,
    /// task_struct.start_time: CLOCK_MONOTONIC ns at fork.
    pub start_time_ns: u64,
    /// CLOCK_MONOTONIC ns when the ledger first saw the thread.
    pub first_seen_ns: u64,
    pub state_since_ns: u64,
    pub on_cpu_ns: u64,
    pub runq_wait_ns: u64,
    pub sleep_ns: u64,
    pub blocked_ns: u64,
    pub iowait_ns: u64,
    /// Part of `iowait_ns` during which the disk served this thread's
    /// process (shared evenly among processes with requests in service).
    pub iowait_own_ns: u64,
    /// This thread's share of the machine's iowait: idle CPU time while it
    /// was in iowait, each interval split evenly among the tasks in iowait
    /// on that CPU.
    pub iowait_share_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub wakeups: u64,
    pub io: IoAccount,
    /// CPU whose `nr_iowait` counts this thread's open iowait interval.
    pub iowait_cpu: u32,
    pub flags: u32,
    /// Per-CPU `share_cum_ns` when the open iowait interval began.
    pub share_snap: u64,
    /// The process's own-I/O clock when the open iowait interval began.
    pub own_snap: u64,
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
            on_cpu_ns: 0,
            runq_wait_ns: 0,
            sleep_ns: 0,
            blocked_ns: 0,
            iowait_ns: 0,
            iowait_own_ns: 0,
            iowait_share_ns: 0,
            voluntary_switches: 0,
            involuntary_switches: 0,
            wakeups: 0,
            io: IoAccount {
                read_requests: 0,
                read_bytes: 0,
                write_requests: 0,
                write_bytes: 0,
                device_ns: 0,
                queue_ns: 0,
            },
            iowait_cpu: 0,
            flags: 0,
            share_snap: 0,
            own_snap: 0,
            comm: [0; TASK_COMM_LEN],
        }
    }
}

/// The final account of a thread, sent through the ring buffer at its last
/// switch-out.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitRecord {
    /// CLOCK_MONOTONIC ns of the final switch-out.
    pub exit_ns: u64,
    pub account: ThreadAccount,
}

/// One CPU's busy / idle / iowait time, computed as /proc/stat does: idle
/// time while tasks that went to sleep on this CPU are in iowait is iowait.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuAccount {
    /// Try-lock word (0 free, 1 held): the account is also updated from other
    /// CPUs (wakeups end iowait intervals counted here). 64-bit because the
    /// BPF target's compare-and-exchange is 64-bit without ALU32.
    pub lock: u64,
    /// 1 while the idle task runs on this CPU.
    pub idle: u32,
    /// Tasks in iowait that went to sleep on this CPU (the kernel's
    /// rq->nr_iowait, for tasks the ledger saw go to sleep).
    pub nr_iowait: u32,
    /// 1 once the first event set `idle` and `since_ns`.
    pub valid: u32,
    /// The task last seen switched in on this CPU (0: idle).
    pub current_tid: u32,
    /// When that switch was seen.
    pub last_switch_ns: u64,
    pub since_ns: u64,
    pub busy_ns: u64,
    pub idle_ns: u64,
    pub iowait_ns: u64,
    /// ∫ (idle ∧ nr_iowait > 0) / nr_iowait dt: each task in iowait on this
    /// CPU accrues the increase of this clock while it waits.
    pub share_cum_ns: u64,
}

/// The machine's "whose I/O is the disk serving" clock.
///
/// `g_cum_ns` = ∫ 1/n(t) dt over the time some process has a request in
/// service, n(t) being the number of such processes. A process accrues
/// own-I/O time at rate 1/n while it has requests in service.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskAccount {
    pub lock: u64,
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
    pub _pad: u32,
    /// `g_cum_ns` when `inflight` last went from 0 to 1.
    pub g_snap_ns: u64,
    /// Own-I/O time accrued over closed in-service periods.
    pub own_cum_ns: u64,
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
    /// Updates skipped because a ledger lock stayed contended.
    pub const LOCK_CONTENDED: u32 = 3;
    /// Block requests that could not be tracked (map full).
    pub const REQUEST_MAP_FULL: u32 = 4;
    /// Processes whose own-I/O clock could not be created (map full).
    pub const PROC_DISK_MAP_FULL: u32 = 5;
    /// Events from a CPU id at or above MAX_CPUS.
    pub const CPU_OUT_OF_RANGE: u32 = 6;
    /// sched_switch events seen.
    pub const SWITCHES: u32 = 7;
    /// Wakeups of threads the ledger had not seen (their sleep is unknown).
    pub const WAKEUP_UNSEEN: u32 = 8;
    /// Exit records sent.
    pub const EXIT_RECORDS: u32 = 9;
    /// Switch-outs of a task that was not the last one seen switched in on
    /// that CPU: a gap in the ledger's view of the CPU.
    pub const UNREPORTED_SWITCH: u32 = 10;
    pub const COUNT: u32 = 11;
}

const _: () = assert!(core::mem::size_of::<IoAccount>() == 48);
const _: () = assert!(core::mem::size_of::<ThreadAccount>() == 208);
const _: () = assert!(core::mem::size_of::<ExitRecord>() == 216);
const _: () = assert!(core::mem::size_of::<CpuAccount>() == 72);
const _: () = assert!(core::mem::size_of::<DiskAccount>() == 40);
const _: () = assert!(core::mem::size_of::<ProcDisk>() == 24);
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
    unsafe impl aya::Pod for ProcDisk {}
    unsafe impl aya::Pod for RequestInfo {}
}

// ---- vprof: uprobe records of `vprofile` (VProfiler, paper 004) ----
pub mod vprof;
