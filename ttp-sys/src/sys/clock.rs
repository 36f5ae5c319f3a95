//! Clocks. The eBPF programs stamp events with bpf_ktime_get_ns(), which is
//! CLOCK_MONOTONIC; userspace reads the same clock to close open intervals.

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// CLOCK_BOOTTIME in ns (CLOCK_MONOTONIC plus the time suspended; /proc's
/// start times count from it).
pub fn boottime_ns() -> u64 {
    read(libc::CLOCK_BOOTTIME)
}

/// CLOCK_REALTIME in ns since the epoch (for reports only).
pub fn realtime_ns() -> u64 {
    read(libc::CLOCK_REALTIME)
}

/// The calling thread's CPU clock (CLOCK_THREAD_CPUTIME_ID) in ns: its
/// runtime up to this instant. The kernel brings a running thread's
/// runtime up to date for it (`task_sched_runtime`), where
/// /proc/thread-self/schedstat shows it as of the last scheduler tick.
pub fn thread_cpu_ns() -> u64 {
    read(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer; these clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
