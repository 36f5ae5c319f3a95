//! Record layouts shared by ttp's eBPF programs and its userspace, defined
//! once. Every type is `#[repr(C)]`, `Copy`, with padding spelled out, and
//! implements `aya::Pod` behind the `user` feature.
#![no_std]

// ---- vprof: uprobe records of `vprofile` (VProfiler, paper 004) ----
pub mod vprof;
