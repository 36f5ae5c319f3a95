//! Windows: images of the ledger taken around one execution, one interval
//! or one process tree, and the targets they are taken on. Builds on
//! `ttp-ledger` and `ttp-sys` (docs/architecture.md, "Crates").

pub mod window;
