//! Background noise with known character, until killed: CPU bursts of
//! `--burst-ms` every `--period-ms` (burst lengths vary 0.5–1.5×, seeded),
//! a small synced file write every period with `--io`, and a short-lived
//! process (`true`) every period with `--spawn`. With `--coin`, each period
//! is instead either all burst or all idle, at random (seeded): work that
//! shares its CPU then takes very different wall times from one run to the
//! next.
use std::{
    io::Write,
    time::{Duration, Instant},
};

fn main() {
    let burst: u64 = ttp_tests::arg("--burst-ms", 30);
    let period: u64 = ttp_tests::arg("--period-ms", 100);
    let io = ttp_tests::flag("--io");
    let spawn = ttp_tests::flag("--spawn");
    let coin = ttp_tests::flag("--coin");
    let path = std::env::temp_dir().join(format!("ttp-noise-{}.dat", std::process::id()));
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    loop {
        let start = Instant::now();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let burst_us = if coin {
            if seed.is_multiple_of(2) {
                period * 1000
            } else {
                0
            }
        } else {
            (burst as f64 * 1000.0 * (0.5 + (seed % 1000) as f64 / 1000.0)) as u64
        };
        ttp_tests::burn(Duration::from_micros(burst_us));
        if io && let Ok(mut f) = std::fs::File::create(&path) {
            let _ = f.write_all(&[7u8; 4096]);
            let _ = f.sync_all();
        }
        if spawn {
            let _ = std::process::Command::new("true").status();
        }
        ttp_tests::sleep_until(start + Duration::from_millis(period));
    }
}
