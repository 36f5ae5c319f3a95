//! Records too large for the 512-byte BPF stack (statements.rs, vprofile.rs)
//! are written in place: reserved in their ring buffer, filled field by
//! field, submitted.
use aya_ebpf::maps::RingBuf;

/// Reserves a `T` in `ring`, lets `fill` write it through the raw pointer
/// and submits it. The memory is uninitialised: `fill` must write every
/// field, padding included, or old ring contents reach userspace. False
/// when the ring was full; the caller counts the record as lost.
#[inline(always)]
pub(crate) fn emit<T: 'static>(ring: &RingBuf, fill: impl FnOnce(*mut T)) -> bool {
    match ring.reserve::<T>(0) {
        Some(mut entry) => {
            fill(entry.as_mut_ptr());
            entry.submit(0);
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
