//! ttp's eBPF programs: an in-kernel ledger of where every thread's time
//! went (sched.rs), per-CPU busy/idle/iowait (cpu.rs) and block I/O with the
//! "whose I/O is the disk serving" clock (block.rs). Nothing per event goes
//! to userspace; exit records go through a ring buffer at a thread's final
//! switch-out, so short-lived threads are never missed. With `--trace`,
//! trace.rs also streams the traced processes' events.
#![no_std]
#![no_main]
#![feature(core_intrinsics)]
#![allow(internal_features)]

mod block;
mod closing;
mod config;
mod cpu;
mod detail;
mod irq;
mod kernel;
mod ledger;
mod lock;
mod ring;
mod sched;
mod statements;
mod sums;
mod trace;
mod vprofile;
mod wire;
mod words;

use aya_ebpf::{macros::map, maps::PerCpuArray};
use ttp_common::stat;

#[map]
static STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(stat::COUNT, 0);

/// Adds one to a kernel-side counter (per CPU, summed by userspace).
#[inline(always)]
pub(crate) fn count(idx: u32) {
    if let Some(p) = STATS.get_ptr_mut(idx) {
        // SAFETY: per-CPU slot, only this CPU writes it.
        unsafe { *p += 1 };
    }
}

#[inline(always)]
pub(crate) fn now_ns() -> u64 {
    // SAFETY: helper without arguments.
    unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
