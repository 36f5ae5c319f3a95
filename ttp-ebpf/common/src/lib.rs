//! Record layouts shared by ttp's eBPF programs and its userspace, defined
//! once. Every type is `#[repr(C)]`, `Copy`, with padding spelled out, and
//! implements `aya::Pod` behind the `user` feature.
#![no_std]
