//! A compute-bound program under test for EMP: burns `--cpu-ms` of its own
//! CPU time (not wall time: sharing the CPU makes it slower, not shorter).
//!
//! * `--pin CPU` pins it to one CPU first.
//! * `--threads N`: the work is done by N threads, `--cpu-ms` each.
//! * `--state DIR` numbers its executions: it reads `DIR/count` (0 when
//!   missing), writes the next number, and appends `index cpu_ns triggered`
//!   to `DIR/spin.log` at the end (cpu_ns = CLOCK_PROCESS_CPUTIME_ID, the
//!   kernel's own count of its process time).
//! * `--trigger DIR --on-runs 3,7`: in those executions it wakes the daemon
//!   of fixture-noisyd (a byte on `DIR/go`) and, after its own work, waits
//!   for the daemon's byte on `DIR/done`, so the daemon's burst lies inside
//!   this execution.
use std::{
    fs::{File, OpenOptions},
    io::{Read, Write},
    path::PathBuf,
    time::Duration,
};

fn main() -> std::io::Result<()> {
    let cpu_ms: u64 = ttp_tests::arg("--cpu-ms", 100);
    let pin: i64 = ttp_tests::arg("--pin", -1);
    if pin >= 0 {
        ttp_tests::pin_to_cpu(pin as usize)?;
    }
    let state = PathBuf::from(ttp_tests::arg("--state", String::new()));
    let count_file = state.join("count");
    let index: u64 = std::fs::read_to_string(&count_file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    if !state.as_os_str().is_empty() {
        std::fs::write(&count_file, (index + 1).to_string())?;
    }
    let trigger = PathBuf::from(ttp_tests::arg("--trigger", String::new()));
    let triggered =
        !trigger.as_os_str().is_empty() && ttp_tests::list_arg("--on-runs").contains(&index);
    if triggered {
        File::options()
            .write(true)
            .open(trigger.join("go"))?
            .write_all(b"g")?;
    }
    // `--threads N`: N threads each burn `--cpu-ms` (the main thread waits).
    let threads: usize = ttp_tests::arg("--threads", 0);
    if threads == 0 {
        ttp_tests::burn(Duration::from_millis(cpu_ms));
    } else {
        let workers: Vec<_> = (0..threads)
            .map(|_| std::thread::spawn(move || ttp_tests::burn(Duration::from_millis(cpu_ms))))
            .collect();
        for w in workers {
            let _ = w.join();
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
