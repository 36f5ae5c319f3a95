//! Forks `--children` short-lived children, one after another; each burns
//! `--child-cpu-us` µs of CPU and exits. With `--wait-stdin` it waits for a
//! line on stdin first. Prints the children's pids, one per line, at the end.
use std::{io::BufRead, time::Duration};

fn main() {
    let n: usize = ttp_tests::arg("--children", 200);
    let cpu_us: u64 = ttp_tests::arg("--child-cpu-us", 500);
    if ttp_tests::flag("--wait-stdin") {
        println!("ready");
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    }
    let mut pids = Vec::with_capacity(n);
    for _ in 0..n {
        // SAFETY: the child only burns CPU and calls _exit.
        match unsafe { libc::fork() } {
            0 => {
                ttp_tests::burn(Duration::from_micros(cpu_us));
                unsafe { libc::_exit(0) };
            }
            pid if pid > 0 => pids.push(pid),
            _ => panic!("fork failed: {}", std::io::Error::last_os_error()),
        }
    }
    for &pid in &pids {
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
    }
    for pid in pids {
        println!("{pid}");
    }
}
