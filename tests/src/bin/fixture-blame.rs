//! Contenders with known behaviour, for the live blame test. One role per
//! process (`--role`), each optionally pinned to one CPU (`--cpu N`):
//!
//! - `victim`: after a line on stdin, for `--seconds`, reads `--chunk-kib`
//!   KiB with O_DIRECT from `--file` and burns `--cpu-us` µs of its own CPU
//!   time, again and again; then prints, as JSON, the bytes it read, the
//!   time it spent inside read calls and its /proc/self/schedstat change
//!   (run time and run-queue wait, the kernel's own counters) and exits.
//! - `reader`: paced O_DIRECT reads — one read of `--chunk-kib` KiB every
//!   `--tick-ms` ms, catching up when late, so that two readers' bytes keep
//!   the ratio of their chunk sizes in every interval (one request each per
//!   tick: the disk's per-request cost, which dominates, is the same).
//! - `burner`: burns CPU.
//! - `idle`: sleeps.
//!
//! Every role stops after `--seconds` (the victim counts from its start
//! signal). Files are created if missing (16 MiB), filled, and synced.
use std::{
    fs::{File, OpenOptions},
    io::{BufRead, Write},
    os::unix::fs::{FileExt, OpenOptionsExt},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

const FILE_BYTES: u64 = 16 << 20;

fn ensure_file(path: &Path) -> std::io::Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() >= FILE_BYTES) {
        return Ok(());
    }
    let mut f = File::create(path)?;
    let chunk = vec![0xa5u8; 1 << 20];
    for _ in 0..FILE_BYTES >> 20 {
        f.write_all(&chunk)?;
    }
    f.sync_all()
}

/// A 4096-aligned buffer, as O_DIRECT requires.
fn aligned(len: usize) -> &'static mut [u8] {
    let layout = std::alloc::Layout::from_size_align(len, 4096).expect("layout");
    // SAFETY: non-zero size; leaked on purpose (one buffer per process).
    unsafe { std::slice::from_raw_parts_mut(std::alloc::alloc_zeroed(layout), len) }
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t with one bit set, for this process.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
            panic!("sched_setaffinity: {}", std::io::Error::last_os_error());
        }
    }
}

fn schedstat() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    let v: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    (v[0], v[1])
}

/// Reads chunk number `i` (cycling through the file) with O_DIRECT.
struct Direct {
    file: File,
    buf: &'static mut [u8],
    next: u64,
}

impl Direct {
    fn open(path: &Path, chunk: usize) -> std::io::Result<Self> {
        ensure_file(path)?;
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)?;
        Ok(Self {
            file,
            buf: aligned(chunk),
            next: 0,
        })
    }

    fn read_one(&mut self) -> std::io::Result<usize> {
        let chunk = self.buf.len() as u64;
        let off = (self.next * chunk) % FILE_BYTES;
        self.next += 1;
        self.file.read_at(self.buf, off)
    }
}

fn main() -> std::io::Result<()> {
    let role: String = ttp_tests::arg("--role", String::new());
    let seconds: f64 = ttp_tests::arg("--seconds", 10.0);
    let cpu: i64 = ttp_tests::arg("--cpu", -1);
    let chunk = ttp_tests::arg::<usize>("--chunk-kib", 64) << 10;
    let file: PathBuf = ttp_tests::arg("--file", PathBuf::new());
    if cpu >= 0 {
        pin(cpu as usize);
    }
    let run_for = Duration::from_secs_f64(seconds);
    match role.as_str() {
        "victim" => {
            let mut disk = Direct::open(&file, chunk)?;
            let cpu_us: u64 = ttp_tests::arg("--cpu-us", 500);
            println!("ready");
            std::io::stdout().flush()?;
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            let (cpu0, wait0) = schedstat();
            let start = Instant::now();
            let (mut bytes, mut read_ns) = (0u64, 0u128);
            while start.elapsed() < run_for {
                let t = Instant::now();
                bytes += disk.read_one()? as u64;
                read_ns += t.elapsed().as_nanos();
                ttp_tests::burn(Duration::from_micros(cpu_us));
            }
            let (cpu1, wait1) = schedstat();
            println!(
                "{{\"bytes\": {bytes}, \"read_ns\": {read_ns}, \"cpu_ns\": {}, \"run_delay_ns\": {}}}",
                cpu1 - cpu0,
                wait1 - wait0
            );
            std::io::stdout().flush()?;
        }
        "reader" => {
            let tick = Duration::from_millis(ttp_tests::arg("--tick-ms", 5));
            let mut disk = Direct::open(&file, chunk)?;
            let start = Instant::now();
            let mut done: u64 = 0;
            while start.elapsed() < run_for {
                let due = (start.elapsed().as_nanos() / tick.as_nanos()) as u64 + 1;
                while done < due {
                    disk.read_one()?;
                    done += 1;
                }
                ttp_tests::sleep_until(start + tick * due as u32);
            }
        }
        "burner" => {
            let start = Instant::now();
            while start.elapsed() < run_for {
                ttp_tests::burn(Duration::from_millis(10));
            }
        }
        "idle" => std::thread::sleep(run_for),
        other => panic!("unknown --role {other:?}: victim, reader, burner or idle"),
    }
    Ok(())
}
