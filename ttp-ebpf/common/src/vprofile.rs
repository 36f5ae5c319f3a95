//! `vprofile` records: per root invocation, the root's duration and the
//! summed duration of each measured child slot (VProfiler, paper 004,
//! Sec. 3.1), plus the counters the probes keep.
//!
//! Probes: a uprobe and a uretprobe on the root function; a uprobe on each
//! measured `call` instruction and one on the instruction after it (the
//! return site). Each attachment carries a cookie ([`cookie`]) naming its
//! call site, the length of the call instruction, the child slot the call's
//! duration is added to, and that slot's parent slot, so one program serves
//! every call site.

/// Child slots per record (columns of `children_ns`).
pub const MAX_SLOTS: usize = 128;
/// Calls open at once on one thread, below the root.
pub const MAX_DEPTH: usize = 16;
/// `parent` value of a slot whose calls are made by the root itself.
pub const PARENT_ROOT: u32 = 0xffff;

/// One invocation of the root on one thread, sent when the root returns.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Record {
    pub tgid: u32,
    pub tid: u32,
    /// Root entry time, `bpf_ktime_get_ns` (CLOCK_MONOTONIC).
    pub start_ns: u64,
    pub root_ns: u64,
    /// Calls that could not be tracked in this invocation (stack deeper
    /// than [`MAX_DEPTH`], or a return site whose call was not open):
    /// nonzero means the sums may be short.
    pub untracked_calls: u32,
    /// Number of slots in use (the rest of `children_ns` is zero).
    pub slots: u32,
    pub children_ns: [u64; MAX_SLOTS],
    /// Probe hits inside `root_ns`, plus one for its two boundary probes
    /// (the entry's return to the program, the return probe's trap): the
    /// number of probe costs the interval includes. Userspace subtracts a
    /// calibrated cost per unit (VProfiler accounts for its own overhead).
    pub root_hits: u32,
    pub _pad: u32,
    /// The same per slot: over the slot's calls, hits inside each call plus
    /// one per call for its boundaries.
    pub children_hits: [u32; MAX_SLOTS],
}

/// Counters kept by the probes (one per CPU, summed by userspace).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Probe program runs (every uprobe and uretprobe hit).
    pub hits: u64,
    /// Root invocations completed.
    pub invocations: u64,
    /// Records dropped because the ring buffer was full.
    pub lost_records: u64,
    /// Nested (recursive) root invocations, folded into the outermost.
    pub nested_roots: u64,
    /// Calls not tracked (see [`Record::untracked_calls`]).
    pub untracked_calls: u64,
    /// Threads that could not get state (per-thread map full).
    pub no_thread_state: u64,
    /// Time spent inside the probe programs, ns (for the overhead per hit).
    pub probe_ns: u64,
}

/// Attachment cookie of a call site and of its return site: site id
/// (bits 40..63), length of the `call` instruction (32..39, so the return
/// address is the probed address plus it), parent slot (16..31,
/// [`PARENT_ROOT`] for the root) and slot (0..15).
pub const fn cookie(site: u32, call_len: u32, parent: u32, slot: u32) -> u64 {
    (((site & 0xff_ffff) as u64) << 40)
        | (((call_len & 0xff) as u64) << 32)
        | (((parent & 0xffff) as u64) << 16)
        | (slot & 0xffff) as u64
}

/// (site, call_len, parent, slot) of a cookie.
pub const fn decode_cookie(c: u64) -> (u32, u32, u32, u32) {
    (
        (c >> 40) as u32,
        ((c >> 32) & 0xff) as u32,
        ((c >> 16) & 0xffff) as u32,
        (c & 0xffff) as u32,
    )
}

/// Call sites one plan can name (24-bit site ids).
pub const MAX_SITES: u32 = 1 << 24;

#[cfg(feature = "user")]
unsafe impl aya::Pod for Record {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for Stats {}

// The layouts have no implicit padding: the kernel and userspace agree.
const _: () = assert!(
    core::mem::size_of::<Record>() == 4 + 4 + 8 + 8 + 4 + 4 + 8 * MAX_SLOTS + 4 + 4 + 4 * MAX_SLOTS
);
const _: () = assert!(core::mem::size_of::<Stats>() == 7 * 8);
const _: () = assert!(MAX_SLOTS < PARENT_ROOT as usize);

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches fields overlapping in the cookie encoding.
    #[test]
    fn cookie_round_trip() {
        assert_eq!(
            decode_cookie(cookie(7, 5, PARENT_ROOT, 3)),
            (7, 5, PARENT_ROOT, 3)
        );
        let max = MAX_SITES - 1;
        assert_eq!(decode_cookie(cookie(max, 15, 127, 0)), (max, 15, 127, 0));
    }
}
