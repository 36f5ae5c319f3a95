//! A workload with known behaviour: sleeps `--sleep-ms` (default 0), burns
//! `--cpu-ms` of CPU, then reads
//! `--read-mib` MiB with O_DIRECT (bypassing the page cache, so every byte
//! comes from the disk) from `--file` (created once if missing or too short,
//! atomically: see `ensure_file`), in reads of
//! `--block-kib` KiB (default 1024; 4 makes one wake-up from iowait per 4
//! KiB; up to 8192). With `--scatter` each read fills every other page of
//! a buffer twice its size (`readv`), so no two of its pages are adjacent
//! in memory: a bio then holds 4 KiB a vector, and a read of more than 256
//! pages takes more than one bio, which the block layer merges into the
//! read's requests. With
//! `--wait-stdin` it waits for a line on stdin before working and for EOF
//! after, so a test can attach first and read /proc after. Prints what it
//! did as JSON on stdout.
use std::{
    fs::{File, OpenOptions},
    io::{BufRead, Read, Write},
    os::unix::fs::OpenOptionsExt,
    path::PathBuf,
    time::Duration,
};

const BLOCK: usize = 1 << 20;

/// Makes `path` hold at least `bytes`. The file is shared by every test
/// process of the same user (two `cargo test` runs on one machine, or two
/// fixtures of one test): a larger one is written under a name of this
/// process's own and renamed over `path` once complete, so a reader never
/// sees it truncated or half written (one that opened the old file keeps
/// reading the old, complete one).
fn ensure_file(path: &PathBuf, bytes: usize) -> std::io::Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() as usize >= bytes) {
        return Ok(());
    }
    let mut own = path.clone().into_os_string();
    own.push(format!(".{}.part", std::process::id()));
    let own = PathBuf::from(own);
    let written = (|| {
        let mut f = File::create(&own)?;
        let chunk = vec![0x5au8; BLOCK];
        for _ in 0..bytes.div_ceil(BLOCK) {
            f.write_all(&chunk)?;
        }
        f.sync_all()?;
        std::fs::rename(&own, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&own);
    }
    written
}

/// A 4096-aligned buffer, as O_DIRECT requires.
fn aligned(len: usize) -> &'static mut [u8] {
    let layout = std::alloc::Layout::from_size_align(len, 4096).expect("layout");
    // SAFETY: non-zero size; leaked on purpose (one buffer per run).
    unsafe { std::slice::from_raw_parts_mut(std::alloc::alloc_zeroed(layout), len) }
}

fn main() -> std::io::Result<()> {
    let sleep_ms: u64 = ttp_tests::arg("--sleep-ms", 0);
    let cpu_ms: u64 = ttp_tests::arg("--cpu-ms", 100);
    let read_mib: usize = ttp_tests::arg("--read-mib", 4);
    let block: usize =
        ttp_tests::arg::<usize>("--block-kib", BLOCK >> 10).clamp(4, (8 * BLOCK) >> 10) << 10;
    let default_file =
        std::env::temp_dir().join(format!("ttp-fixture-{}.dat", unsafe { libc::getuid() }));
    let file: PathBuf = ttp_tests::arg("--file", default_file);
    let wait = ttp_tests::flag("--wait-stdin");
    let scatter = ttp_tests::flag("--scatter");
    ensure_file(&file, read_mib * BLOCK)?;
    let stdin = std::io::stdin();
    if wait {
        println!("ready");
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
    }
    std::thread::sleep(Duration::from_millis(sleep_ms));
    let used = ttp_tests::burn(Duration::from_millis(cpu_ms));
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&file)?;
    let buf = aligned(if scatter { 2 * block } else { block });
    let pages: Vec<libc::iovec> = (0..if scatter { block / 4096 } else { 0 })
        .map(|i| libc::iovec {
            iov_base: buf[2 * i * 4096..].as_mut_ptr().cast(),
            iov_len: 4096,
        })
        .collect();
    let mut read = 0usize;
    while read < read_mib * BLOCK {
        let n = if scatter {
            // SAFETY: each vector is a page of `buf`, which outlives the call.
            let n = unsafe {
                libc::readv(
                    std::os::fd::AsRawFd::as_raw_fd(&f),
                    pages.as_ptr(),
                    pages.len() as i32,
                )
            };
            if n < 0 {
                return Err(std::io::Error::last_os_error());
            }
            n as usize
        } else {
            f.read(&mut buf[..block])?
        };
        if n == 0 {
            break;
        }
        read += n;
    }
    println!(
        "{{\"cpu_ns\": {}, \"read_bytes\": {read}}}",
        used.as_nanos()
    );
    std::io::stdout().flush()?;
    if wait {
        let mut rest = Vec::new();
        stdin.lock().read_to_end(&mut rest)?;
    }
    Ok(())
}
