//! Records too large for the 512-byte BPF stack (statements.rs, vprofile.rs)
//! are written in place: reserved in their ring buffer, filled field by
//! field, submitted.
use aya_ebpf::maps::RingBuf;

/// `bpf_ringbuf_submit`'s flag: no notification of a reader waiting on
/// the ring's fd (include/uapi/linux/bpf.h).
const BPF_RB_NO_WAKEUP: u64 = 1;

/// Reserves a `T` in `ring`, lets `fill` write it through the raw pointer
/// and submits it. The memory is uninitialised: `fill` must write every
/// field, padding included, or old ring contents reach userspace. False
/// when the ring was full; the caller counts the record as lost.
#[inline(always)]
pub(crate) fn emit<T: 'static>(ring: &RingBuf, fill: impl FnOnce(*mut T)) -> bool {
    match ring.reserve::<T>(0) {
        Some(mut entry) => {
            fill(entry.as_mut_ptr());
            // Its readers drain the ring on a timer (statements every
            // 100 ms, serve every tick, vprofile's loop) and never wait on
            // its fd: no wake-up is needed, and none is paid for.
            entry.submit(BPF_RB_NO_WAKEUP);
            true
        }
        None => false,
    }
}

/// Copies `src` into `dst` element by element, as far as the shorter one
/// goes: a bounded loop the verifier accepts, where a slice copy could
/// become a call to memcpy.
#[inline(always)]
pub(crate) fn copy<T: Copy>(dst: &mut [T], src: &[T]) {
    for (d, s) in dst.iter_mut().zip(src.iter()) {
        *d = *s;
    }
}
