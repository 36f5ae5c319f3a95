//! Blame detail: splits the ledger does not keep, maintained only when the
//! loader enables them (`ttp-ebpf blame` sets the `DETAIL_ENABLED` global and
//! attaches the detail programs; the plain ledger leaves them out). Per-thread
//! entries carry the thread's ledger `start_time_ns`, so a reused tid resets
//! its entry instead of adding to its predecessor's.

/// (thread, CPU) pairs: on-CPU and run-queue wait per CPU.
pub const MAX_THREAD_CPUS: u32 = 65536;
/// (thread, device) pairs: completed disk I/O per device.
pub const MAX_THREAD_DEVS: u32 = 16384;
/// Block devices (whole disks).
pub const MAX_DEVICES: u32 = 256;
/// Threads with memory-stall time.
pub const MAX_MEM_THREADS: u32 = 8192;

/// Bits of the minor number in the kernel's internal `dev_t`
/// (include/linux/kdev_t.h MINORBITS): `dev = major << 20 | minor`.
pub const MINOR_BITS: u32 = 20;

pub const fn dev_major(dev: u32) -> u32 {
    dev >> MINOR_BITS
}

pub const fn dev_minor(dev: u32) -> u32 {
    dev & ((1 << MINOR_BITS) - 1)
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadCpuKey {
    pub tid: u32,
    pub cpu: u32,
}

/// One thread's time on one CPU: run there (closed at switch-out) and
/// waited in that CPU's run queue (closed at switch-in there). Only the
/// CPU itself writes its pairs, from sched_switch.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadCpu {
    pub start_time_ns: u64,
    pub on_cpu_ns: u64,
    pub runq_wait_ns: u64,
    /// Switch-in time while the thread runs on this CPU, 0 otherwise: a
    /// reader closes the open on-CPU interval from it.
    pub running_since_ns: u64,
    /// Time of its last switch-in here, kept after it leaves: tells a
    /// reader whether a wait or run the ledger shows open has ended.
    pub switched_in_ns: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadDevKey {
    pub tid: u32,
    /// Whole disk, kernel `dev_t` of the gendisk (see [`MINOR_BITS`]).
    pub dev: u32,
}

/// Bytes and requests completed on a device (block_rq_complete), by one
/// thread or without a known owner. Added with atomic adds: requests
/// complete on any CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceIo {
    pub bytes: u64,
    pub requests: u64,
}

/// A thread's requests completed on one device; the owner is the thread
/// that created the request (the ledger's `REQUESTS` entry).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadDevIo {
    pub start_time_ns: u64,
    pub io: DeviceIo,
}

/// A thread's time in direct reclaim or direct compaction. Begin/end
/// tracepoints run in the thread's own context; `depth` counts open
/// begins so nested or unpaired events never count time twice.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemStall {
    pub start_time_ns: u64,
    /// When the outermost open stall began (valid while `depth > 0`).
    pub since_ns: u64,
    /// Closed stall time.
    pub stall_ns: u64,
    pub depth: u32,
    pub _pad: u32,
}

/// Indices of the detail programs' counters (a per-CPU array of u64).
pub mod stat {
    /// (thread, CPU) pairs that did not fit in the map.
    pub const THREAD_CPU_FULL: u32 = 0;
    /// (thread, device) pairs that did not fit.
    pub const THREAD_DEV_FULL: u32 = 1;
    /// Devices whose unowned I/O did not fit.
    pub const DEVICE_FULL: u32 = 2;
    /// Memory-stall accounts that did not fit.
    pub const MEM_FULL: u32 = 3;
    /// Reads of kernel memory that failed.
    pub const READ_FAILED: u32 = 4;
    pub const COUNT: u32 = 5;
}

const _: () = assert!(core::mem::size_of::<ThreadCpuKey>() == 8);
const _: () = assert!(core::mem::size_of::<ThreadCpu>() == 40);
const _: () = assert!(core::mem::size_of::<ThreadDevKey>() == 8);
const _: () = assert!(core::mem::size_of::<DeviceIo>() == 16);
const _: () = assert!(core::mem::size_of::<ThreadDevIo>() == 24);
const _: () = assert!(core::mem::size_of::<MemStall>() == 32);

#[cfg(feature = "user")]
mod pod {
    use super::*;
    // SAFETY: repr(C), Copy, no implicit padding (sizes asserted above).
    unsafe impl aya::Pod for ThreadCpuKey {}
    unsafe impl aya::Pod for ThreadCpu {}
    unsafe impl aya::Pod for ThreadDevKey {}
    unsafe impl aya::Pod for DeviceIo {}
    unsafe impl aya::Pod for ThreadDevIo {}
    unsafe impl aya::Pod for MemStall {}
}
