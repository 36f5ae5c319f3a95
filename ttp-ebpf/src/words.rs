//! Zeroing and copying map values a word at a time. A struct assignment of
//! more than a few words compiles to a call of `memset`/`memmove`, which on
//! this target copy a byte per loop iteration: the verifier walks every
//! iteration at every call site (a 240-byte thread account zeroed and an
//! exit record copied were half of the instructions it walked in
//! `sched_switch`, and half of the program's load time), and a run pays
//! ~5 instructions a byte. Volatile 8-byte accesses are not turned back into
//! those calls.
use core::{
    mem::{align_of, size_of},
    ptr::{read_volatile, write_volatile},
};

/// Sets `*dst` to all-zero bytes, 8 at a time.
///
/// # Safety
/// `dst` points to a writable, 8-aligned `T` (a map value) that all-zero
/// bytes make valid.
#[inline(always)]
pub unsafe fn zero<T>(dst: *mut T) {
    const { assert!(size_of::<T>().is_multiple_of(8) && align_of::<T>() >= 8) };
    let p = dst.cast::<u64>();
    let mut i = 0;
    while i < size_of::<T>() / 8 {
        // SAFETY: within `*dst`, by the caller's contract and the size check.
        unsafe { write_volatile(p.add(i), 0) };
        i += 1;
    }
}

/// Copies `*src` into `*dst`, 8 bytes at a time.
///
/// # Safety
/// Both point to valid, 8-aligned `T`s that do not overlap; `T` is `Copy`.
#[inline(always)]
pub unsafe fn copy<T: Copy>(dst: *mut T, src: *const T) {
    const { assert!(size_of::<T>().is_multiple_of(8) && align_of::<T>() >= 8) };
    let (d, s) = (dst.cast::<u64>(), src.cast::<u64>());
    let mut i = 0;
    while i < size_of::<T>() / 8 {
        // SAFETY: within both, by the caller's contract and the size check.
        unsafe { write_volatile(d.add(i), read_volatile(s.add(i))) };
        i += 1;
    }
}

/// An array of `N` zero words, zeroed in place (no `memset`).
#[inline(always)]
pub fn zeroed_words<const N: usize>(a: &mut core::mem::MaybeUninit<[u64; N]>) -> &mut [u64; N] {
    // SAFETY: a stack array of u64, 8-aligned; all-zero is valid.
    unsafe {
        zero(a.as_mut_ptr());
        a.assume_init_mut()
    }
}
