//! Measurement protocols applied to the ledger: each turns measured images
//! into results with their sanity checks.
pub mod blame;
pub mod compare;
pub mod emp;
pub mod load;
pub mod statements;
pub mod ttpv2;
pub mod vprofile;
