//! The kernel's spin lock of a map value (`bpf_spin_lock`). The per-CPU
//! and disk accounts are updated from several CPUs (the end of an iowait
//! wait books the CPU it was counted on; requests are issued and complete
//! on any CPU). The helper spins until it holds the lock, with interrupts
//! off while it is held, so no program on the same CPU can nest inside a
//! holder (block_io_done runs from interrupts): an update is never
//! skipped. Before, a bounded try-lock on a compare-and-exchange gave up
//! after 16 attempts (a holder whose vCPU the host descheduled, or one
//! interrupted on its own CPU) and the update was lost (`lock_contended`,
//! 6 in a 6 s `pgbench -c 2` run; docs/ledger-cost.md).
//!
//! The verifier allows no call but the unlock while the lock is held: map
//! lookups, the clock and counters are done before [`lock`] or after the
//! guard is dropped. The lock must be a field of the map value itself, of
//! the type the BTF names `bpf_spin_lock` (ttp_common::bpf_spin_lock), in a
//! map declared with BTF (`#[btf_map]`).
use aya_ebpf::helpers::generated::{bpf_spin_lock, bpf_spin_unlock};

pub struct Guard {
    lock: *mut aya_ebpf::bindings::bpf_spin_lock,
}

/// Takes the lock at `word` (a field of a map value), spinning until it is
/// free.
#[inline(always)]
pub fn lock(word: *mut ttp_common::bpf_spin_lock) -> Guard {
    let lock = word.cast::<aya_ebpf::bindings::bpf_spin_lock>();
    // SAFETY: `word` points into a map value that lives while the program
    // runs; both types are `struct { u32 val; }`.
    unsafe { bpf_spin_lock(lock) };
    Guard { lock }
}

impl Drop for Guard {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: as in `lock`; this program holds it.
        unsafe { bpf_spin_unlock(self.lock) };
    }
}
