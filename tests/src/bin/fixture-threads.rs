//! A thread storm held alive: starts `--threads N` threads (64 KiB stacks)
//! that each burn `--thread-cpu-us` µs of CPU and then wait; prints "ready"
//! when all are alive, waits for a line on stdin, then lets them all end,
//! joins them and prints "done".
use std::{
    io::BufRead,
    sync::{Arc, Barrier, Condvar, Mutex},
    time::Duration,
};

fn main() {
    let n: usize = ttp_tests::arg("--threads", 1000);
    let cpu_us: u64 = ttp_tests::arg("--thread-cpu-us", 0);
    let started = Arc::new(Barrier::new(n + 1));
    let release = Arc::new((Mutex::new(false), Condvar::new()));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let started = Arc::clone(&started);
            let release = Arc::clone(&release);
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || {
                    ttp_tests::burn(Duration::from_micros(cpu_us));
                    started.wait();
                    let (lock, cv) = &*release;
                    let mut go = lock.lock().unwrap();
                    while !*go {
                        go = cv.wait(go).unwrap();
                    }
                })
                .expect("start thread")
        })
        .collect();
    started.wait();
    println!("ready");
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    {
        let (lock, cv) = &*release;
        *lock.lock().unwrap() = true;
        cv.notify_all();
    }
    for h in handles {
        let _ = h.join();
    }
    println!("done");
}
