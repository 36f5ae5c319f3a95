//! A compute-bound program under test for EMP: burns `--cpu-ms` of its own
//! CPU time (not wall time: sharing the CPU makes it slower, not shorter).
//!
//! * `--pin CPU` pins it to one CPU first.
//! * `--threads N`: the work is done by N threads, `--cpu-ms` each.
//! * `--state DIR` numbers its executions: it reads `DIR/count` (0 when
//!   missing), writes the next number (under an exclusive lock on the
//!   file, so executions started at the same moment get distinct numbers),
//!   and appends `index cpu_ns triggered`
//!   to `DIR/spin.log` at the end (cpu_ns = CLOCK_PROCESS_CPUTIME_ID, the
//!   kernel's own count of its process time).
//! * `--trigger DIR --on-runs 3,7`: in those executions it wakes the daemon
//!   of fixture-noisyd (a byte on `DIR/go`) and, after its own work, waits
//!   for the daemon's byte on `DIR/done`, so the daemon's burst lies inside
//!   this execution.
//! * `--affinity-to FILE`: every thread (the main one and each worker)
//!   appends its own `Cpus_allowed_list` line of /proc/thread-self/status
//!   to FILE while it runs: the CPUs the kernel allows it, as it sees them.
use std::{
    fs::{File, OpenOptions},
    io::{Read, Seek, Write},
    os::fd::AsRawFd,
    path::{Path, PathBuf},
    time::Duration,
};

/// This execution's number: the count in `count_file` (0 when missing or
/// empty), which it replaces by the next one. Read and write happen under
/// `flock(LOCK_EX)` on the file itself: two executions that start together
/// (`run -c 2`, or a test's executions overlapping a retry) otherwise read
/// the same count and log the same index. The lock ends when the file is
/// closed.
fn next_index(count_file: &Path) -> std::io::Result<u64> {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(count_file)?;
    // SAFETY: a valid open descriptor; flock has no other preconditions.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut text = String::new();
    f.read_to_string(&mut text)?;
    let index: u64 = text.trim().parse().unwrap_or(0);
    f.set_len(0)?;
    f.rewind()?;
    f.write_all((index + 1).to_string().as_bytes())?;
    Ok(index)
}

/// Appends the calling thread's `Cpus_allowed_list` line to `file`, in one
/// write (O_APPEND: the threads' lines do not interleave).
fn record_affinity(file: Option<&Path>) -> std::io::Result<()> {
    let Some(file) = file else { return Ok(()) };
    let status = std::fs::read_to_string("/proc/thread-self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))
        .unwrap_or("Cpus_allowed_list: (missing)");
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)?
        .write_all(format!("{line}\n").as_bytes())
}

fn main() -> std::io::Result<()> {
    let cpu_ms: u64 = ttp_tests::arg("--cpu-ms", 100);
    let pin: i64 = ttp_tests::arg("--pin", -1);
    if pin >= 0 {
        ttp_tests::pin_to_cpu(pin as usize)?;
    }
    let state = PathBuf::from(ttp_tests::arg("--state", String::new()));
    let index = if state.as_os_str().is_empty() {
        0
    } else {
        next_index(&state.join("count"))?
    };
    let trigger = PathBuf::from(ttp_tests::arg("--trigger", String::new()));
    let triggered =
        !trigger.as_os_str().is_empty() && ttp_tests::list_arg("--on-runs").contains(&index);
    if triggered {
        File::options()
            .write(true)
            .open(trigger.join("go"))?
            .write_all(b"g")?;
    }
    let affinity = PathBuf::from(ttp_tests::arg("--affinity-to", String::new()));
    let affinity = (!affinity.as_os_str().is_empty()).then_some(affinity);
    record_affinity(affinity.as_deref())?;
    // `--threads N`: N threads each burn `--cpu-ms` (the main thread waits).
    let threads: usize = ttp_tests::arg("--threads", 0);
    if threads == 0 {
        ttp_tests::burn(Duration::from_millis(cpu_ms));
    } else {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let affinity = affinity.clone();
                std::thread::spawn(move || {
                    record_affinity(affinity.as_deref())?;
                    ttp_tests::burn(Duration::from_millis(cpu_ms));
                    std::io::Result::Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join().expect("worker thread")?;
        }
    }
    if triggered {
        let mut b = [0u8; 1];
        File::open(trigger.join("done"))?.read_exact(&mut b)?;
    }
    if !state.as_os_str().is_empty() {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(state.join("spin.log"))?;
        // One write of the whole line: with O_APPEND, lines of executions
        // that end at the same time do not interleave.
        let line = format!(
            "{index} {} {}\n",
            ttp_tests::process_cpu().as_nanos(),
            u8::from(triggered)
        );
        log.write_all(line.as_bytes())?;
    }
    Ok(())
}
