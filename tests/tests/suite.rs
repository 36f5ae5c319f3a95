//! The privileged integration tests, one binary: each file of this folder
//! is a module, so the suite links once instead of once per file (a fresh
//! clone's `target/` and build time, docs/benchmarks.md, "The suite").
//! Every test takes `common::serial()`, so no two overlap: what one test
//! loads, starts or switches on never meets another's checks. Run one
//! file's tests with `cargo test -p ttp-tests --test suite FILE::`.
mod common;

mod attach_cli;
mod attach_xcheck;
mod blame_live;
mod dist;
mod emp;
mod keep_exited;
mod lab;
mod lab_faults;
mod lab_netns;
mod lab_study;
mod lab_takeover;
mod lab_tls;
mod ledger;
mod ledger_bytes;
mod ledger_irq;
mod ledger_requests;
mod ledger_wake;
mod leftovers;
mod load;
mod page_reporting;
mod pg_versions;
mod postgres;
mod probe_cost;
mod realworld;
mod realworld_pg;
mod realworld_pg_load;
mod run_cli;
mod run_interleave;
mod run_query_account;
mod run_recovery;
mod serve;
mod serve_otlp;
mod serve_postgres;
mod serve_tls;
mod statements;
mod statements_fingerprint;
mod statements_live;
mod statements_parallel;
mod statements_socket;
mod stress;
mod trace;
mod ttpv2_cold;
mod ttpv2_measures;
mod vprofile;
mod vprofile_namespace;
