//! `blame --from` end to end on the documented example recording
//! (docs/examples/blame-recording.json), whose answer is computed by hand:
//! per 50 ms window postgres waits 10 ms on cpu0 (stress-ng 26 ms, kworker
//! 2 ms, steal 2 ms) and 20 ms on vda (tar 4 MiB, rsync 1 MiB, kworker and
//! jbd2 0.5 MiB each, 0.5 MiB without an owner).
use std::path::PathBuf;

use clap::Parser;

use super::*;
use crate::cli::{Cli, Command};
use ttp_sys::error::exit_code;

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/blame-recording.json")
}

fn args(extra: &[&str]) -> Args {
    let mut argv = vec!["ttp-ebpf", "blame"];
    argv.extend_from_slice(extra);
    match Cli::try_parse_from(argv).expect("arguments parse").command {
        Command::Blame(a) => a,
        other => panic!("parsed as {other:?}"),
    }
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ttp-blame-{}-{name}", std::process::id()))
}

/// The JSON file carries the schema and the hand-computed split; the DOT
/// file is written. Catches a broken load → analyse → export chain.
#[test]
fn from_recording_writes_json_and_dot() {
    let (json, dotf) = (tmp("out.json"), tmp("out.dot"));
    let ex = example();
    run(args(&[
        "--from",
        ex.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--dot",
        dotf.to_str().unwrap(),
    ]))
    .unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "ttp.blame/1");
    assert_eq!(v["victim"]["comm"], "postgres");
    let disk = &v["resources"][1];
    assert_eq!(disk["blocked_ns"], 80_000_000);
    // tar: 4 windows × 20 ms × 4/6.5.
    let tar = v["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["pid"] == 5001)
        .unwrap();
    let expect = 4.0 * 20e6 * 4.0 / 6.5;
    assert!((tar["by_resource"]["disk"].as_f64().unwrap() - expect).abs() < 1e-3);
    // sshd idles: no blame from ttp, a quarter of 120 ms from the baseline.
    let sshd = v["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["pid"] == 812)
        .unwrap();
    assert_eq!(sshd["blame_ns"], 0.0);
    assert!((sshd["overlap_blame_ns"].as_f64().unwrap() - 30e6).abs() < 1e-3);
    let dot_text = std::fs::read_to_string(&dotf).unwrap();
    assert!(dot_text.contains("\"process:5001\" -> \"thread:2\""));
    let _ = std::fs::remove_file(json);
    let _ = std::fs::remove_file(dotf);
}

/// `--window` merges recorded windows (a multiple is required) and
/// `--duration` keeps only the start: blocked totals follow.
#[test]
fn window_and_duration_reshape_the_recording() {
    let ex = example();
    let rec = load(
        &ex,
        &args(&["--window", "100ms", "--from", ex.to_str().unwrap()]),
    )
    .unwrap();
    assert_eq!((rec.windows.len(), rec.window_ns), (2, 100_000_000));
    let rec = load(
        &ex,
        &args(&["--duration", "100ms", "--from", ex.to_str().unwrap()]),
    )
    .unwrap();
    assert_eq!(rec.windows.len(), 2);
    let err = load(
        &ex,
        &args(&["--window", "30ms", "--from", ex.to_str().unwrap()]),
    )
    .unwrap_err();
    assert_eq!(exit_code(&err), 2, "{err:#}");
}

/// Asking for a victim the recording does not hold, or giving a file that
/// is not a recording, is a usage error (exit 2) that says what to do.
#[test]
fn wrong_victim_or_file_is_a_usage_error() {
    let ex = example();
    let err = run(args(&["--pid", "77", "--from", ex.to_str().unwrap()])).unwrap_err();
    assert_eq!(exit_code(&err), 2);
    assert!(
        format!("{err:#}").contains("no thread of pid 77"),
        "{err:#}"
    );
    let bad = tmp("bad.json");
    std::fs::write(&bad, "{\"schema\": \"other\"}").unwrap();
    let err = run(args(&["--from", bad.to_str().unwrap()])).unwrap_err();
    assert_eq!(exit_code(&err), 2);
    let _ = std::fs::remove_file(bad);
    // An empty --known would make every process a known cause.
    let err = run(args(&["--known", "", "--from", ex.to_str().unwrap()])).unwrap_err();
    assert_eq!(exit_code(&err), 2);
    // Live without --pid.
    let err = run(args(&[])).unwrap_err();
    assert_eq!(exit_code(&err), 2);
}
