//! A fork storm: `--procs N` processes, at most `--parallel P` alive at
//! once, each starting and joining `--threads T` threads (each burns
//! `--thread-cpu-us` µs of CPU) and exiting. Every process is reaped with
//! wait4, whose rusage is the kernel's own account of the child's whole
//! CPU time (utime + stime, scaled to its runtime: cputime_adjust), exit
//! path included. With `--out FILE` it writes `pid cpu_us` per process
//! there; at the end it prints `procs N thread_exits E elapsed_ms MS`.
//! With `--wait-stdin` it prints "ready" and waits for a line first.
//! With `--outlive-leader-ms M` each child's main thread ends first (the
//! `exit` system call of one thread, as pthread_exit ends main) and its
//! threads sleep M ms before they burn and end: the process ends with its
//! last thread, M ms or more after its leader.
use std::{
    io::{BufRead, Write},
    time::{Duration, Instant},
};

fn child(threads: usize, cpu_us: u64, outlive_ms: u64) -> ! {
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(outlive_ms));
                ttp_tests::burn(Duration::from_micros(cpu_us));
            })
        })
        .collect();
    if outlive_ms > 0 {
        // SAFETY: ends this thread only (SYS_exit, not exit_group); the
        // others run on and the process ends with the last of them (glibc
        // never saw this thread end, so that one ends it with SYS_exit too).
        unsafe { libc::syscall(libc::SYS_exit, 0) };
    }
    for h in handles {
        let _ = h.join();
    }
    // SAFETY: ends the child without running the parent's atexit handlers.
    unsafe { libc::_exit(0) }
}

/// Reaps one child: (pid, CPU time µs from its rusage).
fn reap() -> (i32, u64) {
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for any of our own children.
    let pid = unsafe { libc::wait4(-1, &mut status, 0, &mut ru) };
    assert!(pid > 0, "wait4: {}", std::io::Error::last_os_error());
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (pid, us(ru.ru_utime) + us(ru.ru_stime))
}

fn main() -> std::io::Result<()> {
    let procs: usize = ttp_tests::arg("--procs", 1000);
    let threads: usize = ttp_tests::arg("--threads", 4);
    let parallel: usize = ttp_tests::arg("--parallel", 4).max(1);
    let cpu_us: u64 = ttp_tests::arg("--thread-cpu-us", 0);
    let out: String = ttp_tests::arg("--out", String::new());
    let outlive_ms: u64 = ttp_tests::arg("--outlive-leader-ms", 0);
    if ttp_tests::flag("--wait-stdin") {
        println!("ready");
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    }
    let start = Instant::now();
    let mut done = Vec::with_capacity(procs);
    let mut alive = 0;
    for _ in 0..procs {
        if alive == parallel {
            done.push(reap());
            alive -= 1;
        }
        // SAFETY: this process is single-threaded; the child starts its
        // threads and leaves with _exit.
        match unsafe { libc::fork() } {
            0 => child(threads, cpu_us, outlive_ms),
            pid if pid > 0 => alive += 1,
            _ => panic!("fork failed: {}", std::io::Error::last_os_error()),
        }
    }
    while alive > 0 {
        done.push(reap());
        alive -= 1;
    }
    let elapsed = start.elapsed();
    if !out.is_empty() {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&out)?);
        for (pid, us) in &done {
            writeln!(f, "{pid} {us}")?;
        }
        f.flush()?;
    }
    println!(
        "procs {} thread_exits {} elapsed_ms {}",
        done.len(),
        done.len() * (threads + 1),
        elapsed.as_millis()
    );
    Ok(())
}
