//! The exit-record ring buffer, drained as records arrive.
//!
//! The kernel writes one record per thread exit (ttp-ebpf/src/ledger.rs);
//! a ring buffer the reader empties only at each refresh fills within a
//! fraction of a second of a fork storm and drops the rest. A dedicated
//! thread waits on the ring's fd with poll(2) and moves every record into
//! a queue of fixed size as soon as the kernel signals one, so the ring
//! only has to hold what arrives while that thread is not running or the
//! queue is full ([`queue_records`]). The ring's size follows from the rate
//! it must absorb ([`ring_bytes`]; docs/ledger.md).
use std::{
    os::fd::{AsRawFd, RawFd},
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use aya::maps::{MapData, RingBuf};
use ttp_common::ExitRecord;

/// Thread exits per second the ring is sized for: twice the 20 000/s that
/// `attach --all` must keep up with on a 2-CPU machine.
pub(crate) const DESIGN_EXIT_RATE: u64 = 40_000;

/// How long the draining thread may be kept off the CPUs at that rate
/// before records are lost.
pub(crate) const DESIGN_STALL_MS: u64 = 1_000;

/// One record in the ring: the record and the ring's 8-byte header.
pub(crate) const RECORD_BYTES: u64 = size_of::<ExitRecord>() as u64 + 8;

/// Ring size for `rate` exits/s and a stall of `stall_ms`: the next power
/// of two (a ring buffer's size must be one) at or above rate × stall ×
/// record size, and at least one page. At the design figures: 40 000 ×
/// 1 s × 256 B = 10.2 MB → 16 MiB.
pub fn ring_bytes(rate: u64, stall_ms: u64) -> u32 {
    let need = rate.saturating_mul(stall_ms).saturating_mul(RECORD_BYTES) / 1000;
    let page = page_size() as u64;
    need.max(page).next_power_of_two().min(1 << 30) as u32
}

/// Records a fixed queue holds ([`ExitDrain::start`] with `fixed`): a
/// quarter of what the ring holds. When the queue is full the draining
/// thread stops taking records out of the ring until the reader empties
/// it (back-pressure), so a record is only ever lost in the kernel, where
/// a full ring counts it (`exit_records_lost`): the ring and the queue
/// together absorb `ring records × 1.25` while the reader does not read
/// (at the design figures 81 920 records, 2 s of 40 000 exits/s). A fixed
/// queue is allocated and written once, when the drain starts, and never
/// grows: a fork storm does not leave its burst's size behind in the
/// process (`attach`; docs/attach.md, "Memory of a long run").
pub(crate) fn queue_records(ring_bytes: u32) -> usize {
    (u64::from(ring_bytes) / RECORD_BYTES / 4).max(1) as usize
}

/// Records a growing queue holds at most (256 MiB), for commands that read
/// seldom from a small ring (serve reads every `--interval`); beyond it,
/// back-pressure as for a fixed queue.
pub(crate) const QUEUE_LIMIT: usize = 1 << 20;

/// The records taken from the ring and not yet read.
struct Queue {
    records: Vec<ExitRecord>,
    /// Records it may hold.
    limit: usize,
}

impl Queue {
    /// Fixed: `n` records, every page written now, so it is resident from
    /// the start (a page first touched by a storm would stay as a step).
    fn fixed(n: usize) -> Self {
        let mut records = Vec::with_capacity(n);
        // SAFETY: ExitRecord is plain integers and byte arrays (repr(C)),
        // for which all zeroes is a valid value.
        records.resize(n, unsafe { std::mem::zeroed::<ExitRecord>() });
        records.clear();
        Self { records, limit: n }
    }

    fn growing() -> Self {
        Self {
            records: Vec::new(),
            limit: QUEUE_LIMIT,
        }
    }

    fn room(&self) -> usize {
        self.limit.saturating_sub(self.records.len())
    }
}

struct Shared {
    ring: Mutex<RingBuf<MapData>>,
    queue: Mutex<Queue>,
    /// Signalled when the reader empties the queue.
    emptied: Condvar,
    stop: AtomicBool,
}

/// The ring buffer and the thread that empties it.
pub(crate) struct ExitDrain {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// How often the draining thread looks at the stop flag when no record
/// arrives (the kernel wakes it sooner when one does).
const POLL_MS: i32 = 50;

impl ExitDrain {
    /// `fixed`: a queue of [`queue_records`]`(ring_bytes)` reserved now,
    /// else one that grows up to [`QUEUE_LIMIT`].
    pub fn start(ring: RingBuf<MapData>, ring_bytes: u32, fixed: bool) -> Self {
        let fd = ring.as_raw_fd();
        let queue = if fixed {
            Queue::fixed(queue_records(ring_bytes))
        } else {
            Queue::growing()
        };
        let shared = Arc::new(Shared {
            ring: Mutex::new(ring),
            queue: Mutex::new(queue),
            emptied: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("ttp-exits".into())
            .spawn(move || run(&s, fd))
            .map_err(|e| log::warn!("exit-record thread not started ({e}); draining at each read"))
            .ok();
        Self { shared, thread }
    }

    /// Moves every record received so far (the queue's, then any still in
    /// the ring) into `out`, in arrival order. The queue keeps its memory.
    pub fn drain(&self, out: &mut Vec<ExitRecord>) {
        // Ring, then queue, as the draining thread locks them: while both
        // are held, no record is between the two.
        let mut ring = lock(&self.shared.ring);
        let mut q = lock(&self.shared.queue);
        out.append(&mut q.records);
        drop(q);
        self.shared.emptied.notify_one();
        while let Some(r) = next_record(&mut ring) {
            out.push(r);
        }
    }
}

impl Drop for ExitDrain {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.emptied.notify_one();
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
        // A full queue: wait for the reader instead of polling a ring that
        // stays readable (the records wait in the ring meanwhile).
        {
            let q = lock(&shared.queue);
            if q.room() == 0 {
                let wait = Duration::from_millis(POLL_MS as u64);
                let _ = shared.emptied.wait_timeout_while(q, wait, |q| {
                    q.room() == 0 && !shared.stop.load(Ordering::Relaxed)
                });
                continue;
            }
        }
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

/// The next whole record in the ring, if any.
fn next_record(ring: &mut RingBuf<MapData>) -> Option<ExitRecord> {
    loop {
        let item = ring.next()?;
        if item.len() >= size_of::<ExitRecord>() {
            // SAFETY: the kernel wrote a whole ExitRecord (checked length);
            // read_unaligned because ring-buffer items are only 8-aligned by
            // convention, not by type.
            return Some(unsafe { std::ptr::read_unaligned(item.as_ptr() as *const ExitRecord) });
        }
    }
}

/// Moves records from the ring into the queue while it has room; the rest
/// stay in the ring.
fn move_ring_to_queue(shared: &Shared) {
    let mut ring = lock(&shared.ring);
    let mut q = lock(&shared.queue);
    while q.room() > 0 {
        match next_record(&mut ring) {
            Some(r) => q.records.push(r),
            None => break,
        }
    }
}

/// The system's page size (4096 if it cannot be read).
pub(crate) fn page_size() -> u32 {
    // SAFETY: sysconf without side effects.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as u32 } else { 4096 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The record's size is not written here: it follows the ledger's
    /// counter list (`for_each_ledger_counter!`), so a counter added there
    /// changes it and these properties still hold.
    #[test]
    fn ring_is_sized_from_rate_and_stall() {
        // The smallest power of two holding rate × stall records, at least
        // a page.
        let page = super::page_size() as u64;
        for (rate, stall_ms) in [(DESIGN_EXIT_RATE, DESIGN_STALL_MS), (4_096, 1_000), (1, 10)] {
            let need = rate * stall_ms * RECORD_BYTES / 1000;
            let r = u64::from(ring_bytes(rate, stall_ms));
            assert!(r.is_power_of_two(), "{r}");
            assert!(r >= need && r >= page, "{r} < {need}");
            assert!(r / 2 < need.max(page), "{r} is twice what {need} needs");
        }
        // At the design figures (40 000 exits/s, 1 s; 256 B a record when
        // this was written): 10.2 MB → 16 MiB.
        assert!(ring_bytes(DESIGN_EXIT_RATE, DESIGN_STALL_MS) >= 16 << 20);
        // Never below a page.
        assert!(ring_bytes(0, 0).is_power_of_two());
        assert!(u64::from(ring_bytes(0, 0)) >= page);
    }

    #[test]
    fn queue_holds_a_quarter_of_the_ring() {
        for ring in [16u32 << 20, 1 << 20, 64 << 10] {
            let records = u64::from(ring) / RECORD_BYTES;
            assert_eq!(queue_records(ring) as u64, records / 4);
        }
        assert_eq!(queue_records(4096) as u64, (4096 / RECORD_BYTES / 4).max(1));
        assert_eq!(queue_records(0), 1);
    }
}
