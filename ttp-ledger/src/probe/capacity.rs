//! How many thread accounts the ledger's `THREADS` map can hold.
//!
//! The map allocates an account when a thread is first seen
//! (BPF_F_NO_PREALLOC), so its size is a ceiling, not memory spent: what
//! it costs up front is its bucket array (16 bytes a bucket, one bucket per
//! entry rounded up to a power of two: 4 MiB at 200 000 entries). It is
//! sized so that every thread the machine may hold fits: the kernel's own
//! limit `/proc/sys/kernel/threads-max`, and never less than twice the
//! threads alive at attach plus room for a burst. `--max-threads` replaces
//! the choice (to raise it on a machine whose limit was raised after
//! attach, or to lower it). A thread that finds the map full is counted
//! (`thread_map_full`) and shown in words; it has no account, the others
//! are unaffected. docs/ledger.md.

/// Accounts are kept in an array indexed by tid (`THREAD_SLOTS`, one
/// preallocated account per possible tid, ledger.rs in ttp-ebpf) when
/// `kernel.pid_max` is at most this: 65 536 × 256 B = 16 MiB. Beyond it
/// (systemd's default pid_max is 4 194 304) the hash is used.
pub(crate) const TID_INDEX_LIMIT: u64 = 1 << 16;

/// Slots of the tid-indexed array for a machine whose `pid_max` is given,
/// or None for the hash: the flag `--max-threads` sizes the hash, so it
/// asks for the hash; so does blame, whose reader samples every 50 ms and
/// would copy every slot each time.
pub(crate) fn tid_slots(pid_max: Option<u64>, requested: Option<u32>, blame: bool) -> Option<u32> {
    if requested.is_some() || blame {
        return None;
    }
    pid_max
        .filter(|&n| n > 0 && n <= TID_INDEX_LIMIT)
        .map(|n| n as u32)
}

/// `/proc/sys/kernel/pid_max`: tids are below it.
pub(crate) fn pid_max() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The map's size when nothing can be read: the compiled-in default.
pub(crate) const FALLBACK: u32 = ttp_common::MAX_THREADS;

/// Never more than this many entries (a 64 MiB bucket array), whatever
/// threads-max says.
pub(crate) const CEILING: u32 = 1 << 22;

/// Entries for a machine whose limit is `threads_max` with `live` threads
/// now; `requested` (the flag) wins when given.
pub(crate) fn thread_map_entries(
    threads_max: Option<u64>,
    live: Option<u64>,
    requested: Option<u32>,
) -> u32 {
    if let Some(n) = requested {
        return n.max(1);
    }
    let floor = live.map_or(FALLBACK as u64, |l| (2 * l + 4096).max(FALLBACK as u64));
    let want = threads_max.map_or(floor, |m| m.max(floor));
    want.min(CEILING as u64) as u32
}

/// `/proc/sys/kernel/threads-max`.
pub(crate) fn threads_max() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/threads-max")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Threads alive now: the fourth field of /proc/loadavg ("running/total").
pub(crate) fn live_threads() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_ascii_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_from_threads_max_and_live_threads() {
        // This machine: threads-max 192 730, ~200 threads alive.
        assert_eq!(thread_map_entries(Some(192_730), Some(200), None), 192_730);
        // A low limit never goes below twice the live threads plus room.
        assert_eq!(thread_map_entries(Some(1_000), Some(20_000), None), 44_096);
        // Nothing readable: the compiled-in size.
        assert_eq!(thread_map_entries(None, None, None), FALLBACK);
        // A huge limit is capped.
        assert_eq!(thread_map_entries(Some(1 << 30), Some(10), None), CEILING);
        // The flag wins, both ways.
        assert_eq!(thread_map_entries(Some(192_730), Some(200), Some(500)), 500);
        assert_eq!(
            thread_map_entries(Some(192_730), Some(200), Some(1 << 23)),
            1 << 23
        );
    }

    #[test]
    fn tid_indexed_only_where_pid_max_is_small_and_nothing_asks_for_the_hash() {
        // This machine: pid_max 32 768.
        assert_eq!(tid_slots(Some(32_768), None, false), Some(32_768));
        assert_eq!(tid_slots(Some(65_536), None, false), Some(65_536));
        // systemd's default.
        assert_eq!(tid_slots(Some(4_194_304), None, false), None);
        assert_eq!(tid_slots(None, None, false), None);
        assert_eq!(tid_slots(Some(32_768), Some(500), false), None);
        assert_eq!(tid_slots(Some(32_768), None, true), None);
    }

    #[test]
    fn live_threads_read_from_loadavg() {
        assert!(live_threads().is_some_and(|n| n > 0));
    }
}
