//! Empty on purpose: the eBPF programs are the `ttp` binary target
//! (src/main.rs). This library target only lets ttp-user name this crate as a
//! build dependency, so cargo rebuilds ttp-user when the programs change.
#![no_std]
