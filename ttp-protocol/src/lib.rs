//! The papers' protocols over windows: TTPv2, EMP, vprofile, blame, the
//! coordinated-omission-free load and statements. Builds on `ttp-window`
//! and the crates below it (docs/architecture.md, "Crates").
pub use ttp_ledger::{accounts, collect, probe};
pub use ttp_sys::{error, sys};
pub use ttp_window::window;

pub mod protocol;
