//! Option validation of `load`: usage errors, defaults, output files.
use clap::Parser;

use super::*;
use crate::cli::{Cli, Command};

fn parse(args: &[&str]) -> LoadArgs {
    let mut argv = vec!["ttp-ebpf", "load"];
    argv.extend_from_slice(args);
    match Cli::try_parse_from(argv).unwrap().command {
        Command::Load(a) => a,
        other => panic!("parsed as {other:?}"),
    }
}

/// Catches bad input that slips through to a run (or panics) instead of
/// a usage error (exit code 2) that says what to do.
#[test]
fn invalid_options_are_usage_errors() {
    let cases: &[&[&str]] = &[
        &[
            "--rate",
            "0",
            "--duration",
            "1s",
            "--simulate",
            "--capacity",
            "10",
        ],
        &[
            "--rate",
            "NaN",
            "--duration",
            "1s",
            "--simulate",
            "--capacity",
            "10",
        ],
        &[
            "--rate",
            "10",
            "--duration",
            "0s",
            "--simulate",
            "--capacity",
            "10",
        ],
        &[
            "--rate",
            "10",
            "--duration",
            "1s",
            "--simulate",
            "--capacity=-1",
        ],
        &[
            "--rate",
            "10",
            "--duration",
            "1s",
            "--simulate",
            "--capacity",
            "10",
            "--connections",
            "0",
        ],
        &[
            "--rate",
            "10",
            "--duration",
            "1s",
            "--simulate",
            "--capacity",
            "10",
            "--",
            "true",
        ],
        &["--rate", "10", "--duration", "1s", "--exec"],
        &[
            "--rate",
            "10",
            "--duration",
            "1s",
            "--exec",
            "--clock",
            "virtual",
            "--",
            "true",
        ],
        &[
            "--rate",
            "10",
            "--duration",
            "1s",
            "--exec",
            "--capacity",
            "5",
            "--",
            "true",
        ],
        &[
            "--rate",
            "10",
            "--duration",
            "1s",
            "--exec",
            "--",
            "/no/such/program",
        ],
    ];
    for args in cases {
        let err = parse(args)
            .validate()
            .err()
            .unwrap_or_else(|| panic!("{args:?} accepted"));
        assert_eq!(ttp_sys::error::exit_code(&err), 2, "{args:?}: {err:#}");
    }
    // And clap itself refuses a run without a target or with two.
    assert!(Cli::try_parse_from(["ttp-ebpf", "load", "--rate", "1", "--duration", "1s"]).is_err());
    assert!(
        Cli::try_parse_from([
            "ttp-ebpf",
            "load",
            "--rate",
            "1",
            "--duration",
            "1s",
            "--simulate",
            "--capacity",
            "2",
            "--exec",
            "--",
            "true"
        ])
        .is_err()
    );
}

/// `-f SCRIPT`: an unreadable file and a script outside the supported
/// subset are usage errors naming the file, before any connection;
/// clap refuses `-f` with `--sql` or `--param`, and `--postgres` with
/// neither. Catches a bad script reaching the server.
#[test]
fn script_problems_are_usage_errors() {
    let dir = std::env::temp_dir().join(format!("ttp-load-script-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.sql");
    std::fs::write(&bad, "\\sleep 1 ms\nSELECT 1;\n").unwrap();
    let missing = dir.join("missing.sql");
    let base = [
        "--rate",
        "1",
        "--duration",
        "1s",
        "--postgres",
        "host=/tmp port=1",
    ];
    for (file, what) in [(&bad, "bad.sql:1: "), (&missing, "missing.sql")] {
        let mut args = base.to_vec();
        args.extend(["-f", file.to_str().unwrap()]);
        let Err(err) = parse(&args).validate() else {
            panic!("{file:?} accepted");
        };
        assert_eq!(ttp_sys::error::exit_code(&err), 2, "{err:#}");
        assert!(format!("{err:#}").contains(what), "{err:#}");
    }
    let with = |extra: &[&str]| {
        let mut argv = vec!["ttp-ebpf", "load"];
        argv.extend_from_slice(&base);
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).is_err()
    };
    assert!(with(&["-f", "x.sql", "--sql", "SELECT 1"]));
    assert!(with(&["-f", "x.sql", "--param", "a=uniform:1:2"]));
    assert!(with(&[]));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Catches defaults that drift from the documented ones: the simulator
/// runs on the virtual clock with the paper's 50 µs, exec on the real
/// clock, the seed is always recorded, `all` runs open then closed.
#[test]
fn defaults() {
    let cfg = parse(&[
        "--rate",
        "10",
        "--duration",
        "1s",
        "--simulate",
        "--capacity",
        "10",
        "--model",
        "all",
    ])
    .validate()
    .unwrap();
    assert_eq!(cfg.clock, ClockKind::Virtual);
    assert_eq!(cfg.sim.unwrap().service_latency_ns, 50_000);
    assert_eq!(cfg.models, vec![Model::Open, Model::Closed]);
    assert_eq!((cfg.plan.max_in_flight, cfg.plan.connections), (4096, 1));
    assert_eq!(cfg.plan.grace_ns, 1_000_000_000);
    let cfg = parse(&[
        "--rate",
        "10",
        "--duration",
        "1s",
        "--seed",
        "7",
        "--exec",
        "--",
        "true",
    ])
    .validate()
    .unwrap();
    assert_eq!(cfg.clock, ClockKind::Real);
    assert_eq!(cfg.plan.seed, 7);
}

/// The whole command on the simulator: catches a JSON document that does
/// not follow `ttp.load/1` (schema first, one phase per model, the
/// series names, the queue model's answer) or files that are listed but
/// not written. Numbers checked against hand computation: 100 req/s for
/// 5 s is 500 requests; a 0.5 s hiccup at 2 s against 125 req/s gives
/// request 200 a wait of 0.5 − (1/100 − 1/125) = 0.498 s, the maximum.
#[test]
fn json_hgrm_and_svg_files() {
    let dir = std::env::temp_dir().join(format!("ttp-load-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, hgrm, svg) = (dir.join("r.json"), dir.join("r.hgrm"), dir.join("r.svg"));
    let args = parse(&[
        "--rate",
        "100",
        "--duration",
        "5s",
        "--model",
        "all",
        "--connections",
        "2",
        "--simulate",
        "--capacity",
        "125",
        "--hiccup-at",
        "2s",
        "--hiccup-for",
        "500ms",
        "--service-latency",
        "0s",
        "--json",
        json.to_str().unwrap(),
        "--hgrm",
        hgrm.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    run(args).unwrap();
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(
        text.starts_with("{\n  \"schema\": \"ttp.load/1\""),
        "{}",
        &text[..80]
    );
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["clock"], "virtual");
    assert_eq!(doc["target"]["kind"], "simulate");
    let phases = doc["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2);
    assert_eq!(phases[0]["model"], "open");
    assert_eq!(phases[1]["model"], "closed");
    assert_eq!(phases[0]["scheduled"], 500);
    assert_eq!(phases[0]["completed_ok"], 500);
    assert_eq!(phases[0]["error_total"], 0);
    assert_eq!(phases[0]["timeline"].as_array().unwrap().len(), 6);
    let open_max = phases[0]["series"]["open_latency"]["max_ns"]
        .as_u64()
        .unwrap();
    assert!(open_max.abs_diff(498_000_000) <= 498_000, "{open_max}");
    assert!(phases[1]["series"]["closed_uncorrected"]["percentiles_ns"]["99"].is_u64());
    assert!(phases[1]["series"]["closed_intended"]["count"].is_u64());
    assert_eq!(doc["expected_open_latency_ns"]["max_ns"], 498_000_000);
    let files: Vec<String> = doc["files"]["hgrm"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(files.len(), 5);
    for f in &files {
        assert!(std::path::Path::new(f).is_file(), "{f} listed but missing");
    }
    assert_eq!(
        std::fs::read_to_string(&hgrm).unwrap(),
        std::fs::read_to_string(dir.join("r.open_latency.hgrm")).unwrap()
    );
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    std::fs::remove_dir_all(&dir).ok();
}
