//! The exit-record ring buffer, drained as records arrive.
//!
//! The kernel writes one record per thread exit (ttp-ebpf/src/ledger.rs);
//! a ring buffer the reader empties only at each refresh fills within a
//! fraction of a second of a fork storm and drops the rest. A dedicated
//! thread waits on the ring's fd with poll(2) and moves every record into
//! a queue as soon as the kernel signals one, so the ring only has to hold
//! what arrives while that thread is not running. The ring's size follows
//! from the rate it must absorb ([`ring_bytes`]; docs/ledger.md).
use std::{
    os::fd::{AsRawFd, RawFd},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
};

use aya::maps::{MapData, RingBuf};
use ttp_common::ExitRecord;

/// Thread exits per second the ring is sized for: twice the 20 000/s that
/// `attach --all` must keep up with on a 2-CPU machine.
pub const DESIGN_EXIT_RATE: u64 = 40_000;

/// How long the draining thread may be kept off the CPUs at that rate
/// before records are lost.
pub const DESIGN_STALL_MS: u64 = 1_000;

/// One record in the ring: the record and the ring's 8-byte header.
pub const RECORD_BYTES: u64 = size_of::<ExitRecord>() as u64 + 8;

/// Ring size for `rate` exits/s and a stall of `stall_ms`: the next power
/// of two (a ring buffer's size must be one) at or above rate × stall ×
/// record size, and at least one page. At the design figures: 40 000 ×
/// 1 s × 256 B = 10.2 MB → 16 MiB.
pub fn ring_bytes(rate: u64, stall_ms: u64) -> u32 {
    let need = rate.saturating_mul(stall_ms).saturating_mul(RECORD_BYTES) / 1000;
    let page = super::trace::page_size() as u64;
    need.max(page).next_power_of_two().min(1 << 30) as u32
}

/// Records the queue holds at most between two reads of the ledger
/// (256 MiB): a command that stops reading must not grow without bound.
/// Records beyond it are dropped and counted as lost exit records.
pub const QUEUE_LIMIT: usize = 1 << 20;

struct Shared {
    ring: Mutex<RingBuf<MapData>>,
    queue: Mutex<Vec<ExitRecord>>,
    stop: AtomicBool,
    /// Records dropped because the queue was at its limit.
    dropped: std::sync::atomic::AtomicU64,
}

/// The ring buffer and the thread that empties it.
pub struct ExitDrain {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// How often the draining thread looks at the stop flag when no record
/// arrives (the kernel wakes it sooner when one does).
const POLL_MS: i32 = 50;

impl ExitDrain {
    pub fn start(ring: RingBuf<MapData>) -> Self {
        let fd = ring.as_raw_fd();
        let shared = Arc::new(Shared {
            ring: Mutex::new(ring),
            queue: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            dropped: std::sync::atomic::AtomicU64::new(0),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("ttp-exits".into())
            .spawn(move || run(&s, fd))
            .map_err(|e| log::warn!("exit-record thread not started ({e}); draining at each read"))
            .ok();
        Self { shared, thread }
    }

    /// Moves every record received so far (and any still in the ring) into
    /// `out`, in arrival order.
    pub fn drain(&self, out: &mut Vec<ExitRecord>) {
        move_ring_to_queue(&self.shared);
        let mut q = lock(&self.shared.queue);
        out.append(&mut q);
    }

    /// Records dropped so far because nobody read the queue (QUEUE_LIMIT).
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }
}

impl Drop for ExitDrain {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn run(shared: &Shared, fd: RawFd) {
    while !shared.stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; the fd stays open while `shared` (which
        // owns the ring) is alive, and this thread is joined before it drops.
        let n = unsafe { libc::poll(&mut pfd, 1, POLL_MS) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                log::warn!("poll on the exit ring failed ({e}); draining at each read");
                return;
            }
        }
        move_ring_to_queue(shared);
    }
}

fn move_ring_to_queue(shared: &Shared) {
    let mut batch = Vec::new();
    // The ring stays locked until the batch is in the queue: a reader's
    // `drain` (ring, then queue) must never find the ring emptied by this
    // thread and the queue not yet holding what it took, or a record read
    // before the reader's drain would reach it only at the next one.
    let mut ring = lock(&shared.ring);
    while let Some(item) = ring.next() {
        if item.len() >= size_of::<ExitRecord>() {
            // SAFETY: the kernel wrote a whole ExitRecord (checked length);
            // read_unaligned because ring-buffer items are only 8-aligned by
            // convention, not by type.
            batch.push(unsafe { std::ptr::read_unaligned(item.as_ptr() as *const ExitRecord) });
        }
    }
    if !batch.is_empty() {
        let mut q = lock(&shared.queue);
        let room = QUEUE_LIMIT.saturating_sub(q.len());
        if batch.len() > room {
            let extra = (batch.len() - room) as u64;
            shared.dropped.fetch_add(extra, Ordering::Relaxed);
            batch.truncate(room);
        }
        q.append(&mut batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_is_sized_from_rate_and_stall() {
        assert_eq!(RECORD_BYTES, 256);
        // 40 000/s × 1 s × 256 B = 10 240 000 B → 16 MiB.
        assert_eq!(ring_bytes(DESIGN_EXIT_RATE, DESIGN_STALL_MS), 16 << 20);
        // 4 096 records exactly fill 1 MiB.
        assert_eq!(ring_bytes(4_096, 1_000), 1 << 20);
        assert_eq!(ring_bytes(4_097, 1_000), 2 << 20);
        // Never below a page, never a non-power of two.
        assert!(ring_bytes(0, 0).is_power_of_two());
        assert!(ring_bytes(0, 0) >= 4096);
    }
}
