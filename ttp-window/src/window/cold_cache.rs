//! The cold-cache procedure of TTPv2 Sec. 3.1, done right before each QE
//! (after its plan and preparation, Fig. 5), shared by `run -- CMD` and
//! the PostgreSQL path:
//!
//! 1. fill the disk's and the disk controller's caches with unrelated data:
//!    read a 64 MB file with O_DIRECT (the paper: "we filled both the disk
//!    and disk controller caches by reading a data file of size 64MB ...
//!    bigger than the hard-drive buffer, which is 32MB"); O_DIRECT so that
//!    the read reaches the device and leaves nothing in the page cache;
//! 2. read a small check file through the page cache (so it is cached);
//! 3. drop the page cache (`sync`, then `drop_caches`: "we flushed the
//!    OS-related caches by using the Linux drop_caches facility");
//! 4. read the check file again: the bytes the kernel ledger sees this
//!    thread read from the device must cover the file, or the drop did not
//!    take effect.
//!
//! The fill and check files live in `/var/tmp` (a disk file system on most
//! machines; `/tmp` is often memory, where O_DIRECT is refused). A fill
//! that cannot be made is skipped and recorded, and the report then says
//! so instead of claiming a cold cache.
use std::{
    fs::{File, OpenOptions},
    io::{Read, Write},
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use ttp_ledger::probe::Ledger;
use ttp_sys::sys::clock;

/// The cold-cache procedure of Sec. 3.1 as done before one QE, in its
/// order: the disk and controller caches filled by reading unrelated data
/// that bypasses the page cache, the page cache dropped, then a check that
/// the drop took effect (a file read before the drop is read again: its
/// bytes must reach the device). Times are CLOCK_REALTIME ns, comparable
/// with the QE's `start_unix_ns`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColdCacheStep {
    /// When the fill started; `None` when it was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill_start_unix_ns: Option<u64>,
    /// Bytes read by the fill (O_DIRECT).
    #[serde(default)]
    pub fill_bytes: u64,
    /// Why the fill was skipped or cut short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill_skipped: Option<String>,
    /// When `sync` and `drop_caches` had returned.
    pub drop_unix_ns: u64,
    /// Size of the file read before and after the drop.
    #[serde(default)]
    pub check_file_bytes: u64,
    /// Bytes the ledger saw read from the device for the re-read after the
    /// drop; `None` when the check could not be made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_device_bytes: Option<u64>,
}

impl ColdCacheStep {
    /// The re-read after the drop reached the device (all of it, in whole
    /// pages).
    pub fn flushed(&self) -> Option<bool> {
        Some(self.check_device_bytes? >= self.check_file_bytes)
    }
}

/// Size of the fill (Sec. 3.1: 64 MB).
pub(crate) const FILL_BYTES: u64 = 64 << 20;
/// Size of the check file.
const CHECK_BYTES: u64 = 1 << 20;
/// Read size of the fill: 1 MiB, aligned for O_DIRECT.
const FILL_CHUNK: usize = 1 << 20;

/// The files of the procedure, created once per run.
pub struct ColdCache {
    dir: PathBuf,
}

impl ColdCache {
    pub fn new() -> Self {
        Self {
            dir: PathBuf::from("/var/tmp"),
        }
    }

    fn fill_path(&self) -> PathBuf {
        self.dir.join("ttp-cold-cache-fill.dat")
    }

    fn check_path(&self) -> PathBuf {
        self.dir.join("ttp-cold-cache-check.dat")
    }

    /// Steps 1–4 above. An error only when the page cache cannot be
    /// dropped (not root); a fill or check that cannot be made is recorded
    /// in the step.
    pub fn before_qe(&self, ledger: &Ledger) -> std::io::Result<ColdCacheStep> {
        let mut step = ColdCacheStep::default();
        let start = clock::realtime_ns();
        match fill(&self.fill_path()) {
            Ok(n) => {
                step.fill_start_unix_ns = Some(start);
                step.fill_bytes = n;
                if n < FILL_BYTES {
                    step.fill_skipped = Some(format!("only {n} of {FILL_BYTES} bytes read"));
                }
            }
            Err(e) => {
                step.fill_skipped = Some(format!(
                    "reading {} with O_DIRECT failed: {e}",
                    self.fill_path().display()
                ));
            }
        }
        log::info!(
            "cold cache: fill {} bytes with O_DIRECT{}",
            step.fill_bytes,
            step.fill_skipped
                .as_deref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default()
        );
        let check = self.check_path();
        let cached = ensure_file(&check, CHECK_BYTES).and_then(|_| read_all(&check));
        ttp_sys::sys::page_cache::drop_page_cache()?;
        step.drop_unix_ns = clock::realtime_ns();
        log::info!("cold cache: page cache dropped");
        if cached.is_ok() {
            step.check_file_bytes = CHECK_BYTES;
            step.check_device_bytes = device_bytes_of(ledger, || read_all(&check));
        }
        log::info!(
            "cold cache: check re-read {} of {} bytes from the device",
            step.check_device_bytes
                .map_or("unknown".into(), |b| b.to_string()),
            step.check_file_bytes
        );
        Ok(step)
    }
}

/// The files go with the run (on an error too): 65 MiB not left behind.
impl Drop for ColdCache {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.fill_path());
        let _ = std::fs::remove_file(self.check_path());
    }
}

impl Default for ColdCache {
    fn default() -> Self {
        Self::new()
    }
}

/// Bytes this thread read from block devices while `read` ran, as the
/// ledger counts them (its per-thread `io.read_bytes`).
fn device_bytes_of(ledger: &Ledger, read: impl FnOnce() -> std::io::Result<u64>) -> Option<u64> {
    // SAFETY: no arguments.
    let tid = unsafe { libc::gettid() } as u32;
    let mine = |l: &Ledger| {
        l.snapshot()
            .ok()?
            .threads
            .iter()
            .find(|t| t.tid == tid)
            .map(|t| t.io.read_bytes)
    };
    let before = mine(ledger).unwrap_or(0);
    read().ok()?;
    Some(mine(ledger)?.saturating_sub(before))
}

/// Writes `len` bytes of a pattern to `path` unless it already has them.
fn ensure_file(path: &Path, len: u64) -> std::io::Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() >= len) {
        return Ok(());
    }
    let mut f = File::create(path)?;
    let chunk = vec![0xa5u8; FILL_CHUNK];
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    f.sync_all()
}

/// Reads the whole file through the page cache; returns the bytes read.
fn read_all(path: &Path) -> std::io::Result<u64> {
    let mut f = File::open(path)?;
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        total += n as u64;
    }
}

/// Reads [`FILL_BYTES`] of `path` with O_DIRECT (creating it first).
fn fill(path: &Path) -> std::io::Result<u64> {
    ensure_file(path, FILL_BYTES)?;
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    let layout = std::alloc::Layout::from_size_align(FILL_CHUNK, 4096)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    // SAFETY: non-zero size; freed below with the same layout.
    let ptr = unsafe { std::alloc::alloc(layout) };
    if ptr.is_null() {
        return Err(std::io::Error::other("no memory for the fill buffer"));
    }
    // SAFETY: `ptr` is valid for FILL_CHUNK bytes until dealloc.
    let buf = unsafe { std::slice::from_raw_parts_mut(ptr, FILL_CHUNK) };
    let mut total = 0u64;
    let result = loop {
        if total >= FILL_BYTES {
            break Ok(total);
        }
        match f.read(buf) {
            Ok(0) => break Ok(total),
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break Err(e),
        }
    };
    // SAFETY: allocated above with `layout`.
    unsafe { std::alloc::dealloc(ptr, layout) };
    result
}
