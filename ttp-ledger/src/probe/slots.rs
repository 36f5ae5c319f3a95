//! The id-indexed arrays (`THREAD_SLOTS` by tid, `PROC_SLOTS` by tgid,
//! BPF_F_MMAPABLE) read through a read-only shared mapping: a snapshot
//! scans the slots in place instead of copying every one through bpf(2)
//! (33 batched calls and 8.5–36 ms for 32 768 thread slots under load,
//! docs/ledger-cost.md "Per-event cost").
use std::{
    io,
    marker::PhantomData,
    mem::{offset_of, size_of},
    os::fd::{AsFd, AsRawFd},
};

use aya::{
    Pod,
    maps::{Array, IterableMap, MapData},
};
use ttp_common::{ProcDisk, ThreadAccount};

/// A value kept in a slot indexed by an id that the value names: the slot
/// holds one when that id equals the slot's index (0 marks it free).
pub(crate) trait Slot: Pod {
    /// Byte offset of the value's u32 id.
    const ID_OFFSET: usize;
}

impl Slot for ThreadAccount {
    const ID_OFFSET: usize = offset_of!(ThreadAccount, tid);
}

impl Slot for ProcDisk {
    const ID_OFFSET: usize = offset_of!(ProcDisk, tgid);
}

/// A read-only view of the array's values.
pub(crate) struct SlotView<T: Slot> {
    base: *mut libc::c_void,
    len: usize,
    slots: usize,
    _values: PhantomData<T>,
}

// SAFETY: the mapping is read-only and lives until drop; the kernel writes
// it concurrently, which readers tolerate as for any map read (a slot may
// be read mid-update).
unsafe impl<T: Slot> Send for SlotView<T> {}
unsafe impl<T: Slot> Sync for SlotView<T> {}

impl<T: Slot> SlotView<T> {
    /// Array values are laid out every round_up(value_size, 8) bytes
    /// (kernel/bpf/arraymap.c, `elem_size`).
    const STRIDE: usize = size_of::<T>().next_multiple_of(8);

    pub(crate) fn map(array: &Array<MapData, T>) -> io::Result<Self> {
        let slots = array.len() as usize;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = (slots * Self::STRIDE).next_multiple_of(page);
        let fd = array.map().fd().as_fd().as_raw_fd();
        // SAFETY: a new read-only shared mapping of the map's fd.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            base,
            len,
            slots,
            _values: PhantomData,
        })
    }

    /// The values the slots hold: a slot holds one when its id is its
    /// index (0 marks it free).
    pub(crate) fn values(&self) -> Vec<T> {
        let mut out = Vec::new();
        for i in 1..self.slots {
            // SAFETY: slot i lies inside the mapping, 8-aligned (page-aligned
            // base, STRIDE a multiple of 8), its id a 4-aligned u32 inside
            // it; volatile because the kernel changes it underneath.
            let p = unsafe { (self.base as *const u8).add(i * Self::STRIDE) };
            let id = unsafe { std::ptr::read_volatile(p.add(T::ID_OFFSET) as *const u32) };
            if id as usize == i {
                out.push(unsafe { std::ptr::read_volatile(p as *const T) });
            }
        }
        out
    }
}

impl<T: Slot> Drop for SlotView<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.base, self.len) };
    }
}
