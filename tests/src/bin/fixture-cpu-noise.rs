//! Background noise for EMP tests, until killed:
//! * `--burners N` CPU burners (threads) pinned to `--pin CPU`, each
//!   alternating busy and idle phases of random length in
//!   [`--phase-min-ms`, `--phase-max-ms`] (busy with probability 1/2;
//!   `--seed` fixes the sequences), so a program sharing that CPU sees its
//!   elapsed time vary by up to N + 1 times, not its CPU time;
//! * with `--spawn-every-ms M`, a short-lived `/bin/true` every M ms (from
//!   an unpinned thread).
//!
//! Prints "ready" once everything runs.
use std::{
    io::Write,
    time::{Duration, Instant},
};

fn burner(pin: i64, min_ms: u64, max_ms: u64, mut seed: u64) {
    if pin >= 0 && ttp_tests::pin_to_cpu(pin as usize).is_err() {
        return;
    }
    let mut next = || {
        // xorshift64*
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    loop {
        let r = next();
        let len = Duration::from_millis(min_ms + (r >> 1) % (max_ms - min_ms));
        if r & 1 == 1 {
            let end = Instant::now() + len;
            let mut x = r;
            while Instant::now() < end {
                for i in 0..10_000u64 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
                }
            }
        } else {
            std::thread::sleep(len);
        }
    }
}

fn main() -> std::io::Result<()> {
    let pin: i64 = ttp_tests::arg("--pin", -1);
    let burners: u64 = ttp_tests::arg("--burners", 1);
    let min_ms: u64 = ttp_tests::arg("--phase-min-ms", 50);
    let max_ms: u64 = ttp_tests::arg("--phase-max-ms", 400).max(min_ms + 1);
    let every_ms: u64 = ttp_tests::arg("--spawn-every-ms", 0);
    let seed: u64 = ttp_tests::arg("--seed", 0x9e37_79b9_7f4a_7c15);
    if every_ms > 0 {
        std::thread::spawn(move || {
            loop {
                let _ = std::process::Command::new("/bin/true").status();
                std::thread::sleep(Duration::from_millis(every_ms));
            }
        });
    }
    for i in 0..burners {
        let s = seed.wrapping_add(i.wrapping_mul(0x1234_5678_9abc_def1)) | 1;
        std::thread::spawn(move || burner(pin, min_ms, max_ms, s));
    }
    println!("ready");
    std::io::stdout().flush()?;
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
