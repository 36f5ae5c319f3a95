//! A bounded try-lock on a u64 in a map value. The per-CPU and disk accounts
//! are updated from several CPUs (a wakeup on one CPU ends an iowait interval
//! counted on another; requests complete on any CPU). bpf_spin_lock needs BTF
//! for the map value, which legacy aya maps lack, so this uses the BPF atomic
//! compare-and-exchange (kernel ≥ 5.12). A program that cannot take the lock
//! within SPINS attempts (e.g. it interrupted the holder on the same CPU)
//! skips its update and counts it in `stat::LOCK_CONTENDED`: never a hang,
//! never hidden. SPINS is small because the verifier walks every attempt.
use core::intrinsics::{AtomicOrdering::SeqCst, atomic_cxchg, atomic_xchg};

const SPINS: u64 = 16;

pub struct Guard {
    word: *mut u64,
}

pub fn try_lock(word: *mut u64) -> Option<Guard> {
    for _ in 0..SPINS {
        // SAFETY: `word` points into a map value that lives while the program
        // runs. (core::sync::atomic offers no CAS on the BPF target; the
        // intrinsic lowers to BPF_ATOMIC | BPF_CMPXCHG.)
        if unsafe { atomic_cxchg::<u64, { SeqCst }, { SeqCst }>(word, 0, 1) }.1 {
            return Some(Guard { word });
        }
    }
    crate::count(ttp_common::stat::LOCK_CONTENDED);
    None
}

impl Drop for Guard {
    fn drop(&mut self) {
        // SAFETY: as in try_lock. An exchange (not a plain store) so the
        // release is an atomic instruction the verifier and JIT order.
        unsafe { atomic_xchg::<u64, { SeqCst }>(self.word, 0) };
    }
}
