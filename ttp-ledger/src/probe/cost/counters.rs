//! The kernel's BPF run-time statistics: switched on for as long as an fd
//! is held, and each program's counters read from its fd.
use std::{
    os::fd::{AsRawFd, BorrowedFd, OwnedFd},
    time::Duration,
};

/// Why the probes' cost cannot be measured on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CostUnavailable(pub String);

/// Length of one sampling window (the statistics on).
pub const SAMPLE: Duration = Duration::from_millis(200);
/// A sampling window begins every PERIOD (the first right at start): the
/// statistics are on 10 % of the time, ~2 ns a run on average.
pub const PERIOD: Duration = Duration::from_secs(2);

/// Enables the kernel's BPF run-time statistics for as long as the returned
/// fd is open.
pub fn enable_stats() -> Result<OwnedFd, CostUnavailable> {
    aya::sys::enable_stats(aya::sys::Stats::RunTime).map_err(|e| {
        CostUnavailable(format!(
            "the kernel refused BPF_ENABLE_STATS ({e}): the probes' own cost is not measured (needs kernel ≥ 5.8 and CAP_SYS_ADMIN)"
        ))
    })
}

/// One program's counters as the kernel keeps them (since it was loaded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgramCounters {
    pub run_count: u64,
    pub run_time_ns: u64,
    pub recursion_misses: u64,
}

/// The counters of a loaded program, by BPF_OBJ_GET_INFO_BY_FD (aya's
/// `ProgramInfo` has no accessor for `recursion_misses`). The kernel fills
/// in as much of `bpf_prog_info` as both sides know; a kernel older than
/// 5.12 leaves `recursion_misses` zero.
pub(crate) fn program_counters(fd: BorrowedFd<'_>) -> std::io::Result<ProgramCounters> {
    use aya_obj::generated::{bpf_attr, bpf_cmd, bpf_prog_info};
    // SAFETY: both are plain C structs for which all-zero is valid.
    let mut info: bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    attr.info.bpf_fd = fd.as_raw_fd() as u32;
    attr.info.info = std::ptr::from_mut(&mut info) as u64;
    attr.info.info_len = size_of::<bpf_prog_info>() as u32;
    // SAFETY: bpf(2) with a valid attr whose `info` points at a buffer of
    // `info_len` bytes that outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            bpf_cmd::BPF_OBJ_GET_INFO_BY_FD as libc::c_long,
            std::ptr::from_mut(&mut attr),
            size_of::<bpf_attr>(),
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(ProgramCounters {
        run_count: info.run_cnt,
        run_time_ns: info.run_time_ns,
        recursion_misses: info.recursion_misses,
    })
}
