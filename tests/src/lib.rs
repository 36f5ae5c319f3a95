//! Workload fixtures with known behaviour (src/bin/) and helpers for the
//! privileged integration tests (tests/).
use std::time::{Duration, Instant};

/// CPU time of the calling thread.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer, clock always present on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Burns `cpu` of this thread's CPU time (not wall time: preemption does not
/// shorten the work). Returns the CPU time actually used.
pub fn burn(cpu: Duration) -> Duration {
    let start = thread_cpu();
    let mut x: u64 = 1;
    while thread_cpu() - start < cpu {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
    std::hint::black_box(x);
    thread_cpu() - start
}

/// Sleeps `d` of wall time.
pub fn sleep_until(end: Instant) {
    let now = Instant::now();
    if end > now {
        std::thread::sleep(end - now);
    }
}

/// Parses `--name value` from argv, with a default.
pub fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

/// Pins the calling thread (and the threads and processes it starts later)
/// to one CPU.
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(std::io::Error::other("cpu number out of range"));
    }
    // SAFETY: a zeroed cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is within the set (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: valid set of the size given; pid 0 = the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// CPU time of the whole process (all threads, live and exited).
pub fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer, clock always present on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A comma-separated list argument (`--name 3,7`), empty when absent.
pub fn list_arg(name: &str) -> Vec<u64> {
    arg(name, String::new())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}
