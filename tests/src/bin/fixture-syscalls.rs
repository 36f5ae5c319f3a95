//! A workload whose TTPv2 Sec. 3.5 measures are known: burns `--cpu-ms` of
//! CPU, makes `--reads` one-byte read(2) calls on /dev/zero and `--writes`
//! one-byte write(2) calls on /dev/null, touches `--pages` fresh anonymous
//! pages (one minor fault each), and, with `--file`, drops that file from
//! the page cache and touches one byte every 256 KiB of a mapping of it
//! (major faults).
//!
//! Last, it reads its own /proc/self/io and /proc/self/stat with one read(2)
//! each and writes what they said, with one write(2), to
//! `--out-dir/<pid>`, then exits without another system call:
//! `syscr syscw minflt majflt guest cguest file_majflt`, the last being the
//! major faults of the mapping of `--file` alone (getrusage around it). The
//! process's final counts are then known: syscr 2 more than reported (the
//! two reads, each counted once it returns), syscw 1 more, the faults and
//! guest time as reported.
//!
//! No fault after the report: first thing, it locks every page it has
//! mapped (mlockall(MCL_CURRENT): its code, libc's, its stack), so the code
//! that formats and writes the report is in its page tables already. A
//! fault on a page of the file's cache counts as major whenever the kernel
//! had to retry it (the page locked by someone else, a readahead started),
//! without any read from the device; once, one did so after the report
//! (33 major faults against the 32 reported). Needs root or a
//! RLIMIT_MEMLOCK above the program's size.
use std::{
    fs::OpenOptions, io::Write, os::unix::fs::OpenOptionsExt, path::PathBuf, time::Duration,
};

const PAGE: usize = 4096;

fn read_once(path: &str, buf: &mut [u8]) -> usize {
    let c = std::ffi::CString::new(path).expect("path");
    // SAFETY: plain open/read/close on a valid buffer.
    unsafe {
        let fd = libc::open(c.as_ptr(), libc::O_RDONLY);
        assert!(fd >= 0, "open {path}");
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        assert!(n > 0, "read {path}");
        n as usize
    }
}

/// Major faults: the file dropped from the page cache, then one byte every
/// 256 KiB of a shared mapping read (more than the kernel's fault-around
/// and read-around windows, so most touches go to the device).
fn major_faults(path: &PathBuf) {
    const LEN: usize = 8 << 20;
    if std::fs::metadata(path).map_or(true, |m| (m.len() as usize) < LEN) {
        let mut f = std::fs::File::create(path).expect("create --file");
        f.write_all(&vec![0x5au8; LEN]).expect("write --file");
        f.sync_all().expect("sync --file");
    }
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOATIME)
        .open(path)
        .or_else(|_| std::fs::File::open(path))
        .expect("open --file");
    use std::os::fd::AsRawFd;
    // SAFETY: fadvise and mmap on an open file; the mapping is only read.
    unsafe {
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        let p = libc::mmap(
            std::ptr::null_mut(),
            LEN,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap --file");
        libc::madvise(p, LEN, libc::MADV_RANDOM);
        let mut sum = 0u64;
        for off in (0..LEN).step_by(256 << 10) {
            sum += u64::from(std::ptr::read_volatile((p as *const u8).add(off)));
        }
        std::hint::black_box(sum);
        libc::munmap(p, LEN);
    }
}

/// The process's major faults so far (getrusage: no read or write).
fn majflt_now() -> i64 {
    // SAFETY: getrusage fills a zeroed struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u.ru_majflt
    }
}

fn main() {
    let cpu_ms: u64 = ttp_tests::arg("--cpu-ms", 100);
    let reads: u64 = ttp_tests::arg("--reads", 0);
    let writes: u64 = ttp_tests::arg("--writes", 0);
    let pages: usize = ttp_tests::arg("--pages", 0);
    let file: Option<PathBuf> = std::env::args()
        .skip_while(|a| a != "--file")
        .nth(1)
        .map(PathBuf::from);
    let out_dir: PathBuf = ttp_tests::arg("--out-dir", std::env::temp_dir());
    // SAFETY: mlockall has no memory-safety preconditions.
    if unsafe { libc::mlockall(libc::MCL_CURRENT) } != 0 {
        eprintln!(
            "fixture-syscalls: mlockall: {} (run as root or raise `ulimit -l`)",
            std::io::Error::last_os_error()
        );
        std::process::exit(2);
    }

    ttp_tests::burn(Duration::from_millis(cpu_ms));
    let mut byte = [0u8; 1];
    // SAFETY: one-byte read/write on valid descriptors and buffer.
    unsafe {
        let zero = libc::open(c"/dev/zero".as_ptr(), libc::O_RDONLY);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        assert!(zero >= 0 && null >= 0);
        for _ in 0..reads {
            libc::read(zero, byte.as_mut_ptr().cast(), 1);
        }
        for _ in 0..writes {
            libc::write(null, byte.as_ptr().cast(), 1);
        }
        libc::close(zero);
        libc::close(null);
    }
    if pages > 0 {
        // SAFETY: an anonymous private mapping, written once per page.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                pages * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            for i in 0..pages {
                std::ptr::write_volatile((p as *mut u8).add(i * PAGE), 1);
            }
            libc::munmap(p, pages * PAGE);
        }
    }
    let file_majflt = file.as_ref().map_or(0, |f| {
        let before = majflt_now();
        major_faults(f);
        majflt_now() - before
    });

    // The report: everything it needs is allocated before the two reads.
    let path = out_dir.join(std::process::id().to_string());
    let mut out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("open --out-dir file");
    let mut line = String::with_capacity(256);
    let (mut io, mut stat) = ([0u8; 1024], [0u8; 1024]);
    let n_io = read_once("/proc/self/io", &mut io);
    let n_stat = read_once("/proc/self/stat", &mut stat);
    let io = std::str::from_utf8(&io[..n_io]).expect("io text");
    let stat = std::str::from_utf8(&stat[..n_stat]).expect("stat text");
    let field = |name: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .expect("io field")
    };
    // stat fields after the command's closing parenthesis start at field 3.
    let rest: Vec<&str> = stat[stat.rfind(')').expect("stat comm") + 1..]
        .split_whitespace()
        .collect();
    let f = |n: usize| rest[n - 3];
    use std::fmt::Write as _;
    let _ = writeln!(
        line,
        "{} {} {} {} {} {} {file_majflt}",
        field("syscr:"),
        field("syscw:"),
        f(10),
        f(12),
        f(43),
        f(44)
    );
    out.write_all(line.as_bytes()).expect("write report");
    // SAFETY: ends the process without flushing or closing anything more.
    unsafe { libc::_exit(0) }
}
