//! Saved results read back: each kind from a document its own module
//! wrote, against numbers worked out independently (the TTPv2 paper's
//! Table IX/XV, hand-written measures).
use std::path::PathBuf;

use serde_json::{Value, json};

use super::*;
use ttp_ttpv2::{
    analyse,
    analysis::{ANALYZE_SCHEMA, AnalyzeDocument, RunDocument},
    import::read_qe_csv,
    model::Setup,
};

fn table_ix() -> Vec<ttp_ttpv2::QcInput> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/ttpv2/table_ix.csv");
    read_qe_csv(&path, &Setup::default()).expect("Table IX fixture")
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ttp-render-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A saved `analyze` of the paper's Table IX renders the per-QE Time_calc
/// of Table XV and the median of Sec. 10 (1992.5 ms). Catches a table that
/// reads the wrong field, a dispatch on the wrong schema, and rows lost.
#[test]
fn analyze_document_renders_table_xv() {
    let a = analyse(&table_ix(), None, crate::report::ttpv2::paragraph::text);
    let doc = AnalyzeDocument {
        schema: ANALYZE_SCHEMA.into(),
        machine: None,
        qcs: a.qcs,
        checks: a.checks,
        paragraph: a.paragraph,
        correlations: None,
    };
    let r = load(serde_json::to_value(&doc).unwrap()).unwrap();
    let t = r.table();
    let col = t.columns.iter().position(|c| c == "time_calc_ms").unwrap();
    let calc: Vec<&str> = t.rows.iter().map(|row| row[col].as_str()).collect();
    assert_eq!(
        calc,
        [
            "2000.000", "1975.000", "2115.000", "1985.000", "2005.000", "1970.000", "1990.000",
            "1995.000"
        ]
    );
    assert!(
        r.markdown().contains("median Time_calc 1992.500 ms"),
        "{}",
        r.markdown()
    );
    assert!(r.text().contains("1992.5"));
}

/// The same Q@C saved by `run` (ttp.run/1) renders through the TTPv2
/// module and draws its chart. Catches a run file rejected or a plot that
/// is not written where --plot says.
#[test]
fn run_document_renders_and_plots() {
    let doc = RunDocument::new(&table_ix()[0], None, crate::report::ttpv2::paragraph::text);
    let r = load(serde_json::to_value(&doc).unwrap()).unwrap();
    assert_eq!(r.table().rows.len(), 8);
    let csv = r.table().csv();
    assert!(csv.starts_with("qc,qe,time_meas_ms,time_calc_ms"));
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .contains(",1,9321.000,2000.000,"),
        "{csv}"
    );
    let dir = tmpdir("run");
    let files = r.plots(&dir).unwrap();
    assert_eq!(files, vec![dir.join("ttpv2.svg")]);
    assert!(
        std::fs::read_to_string(&files[0])
            .unwrap()
            .starts_with("<svg")
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `run --blame` prints its per-QE blame through the same `Rendered` impl
/// `report` uses, so a saved run with blame shows it again and a run
/// without blame shows no such section. Catches the section lost from the
/// saved report, or printed for a run that did not measure blame.
#[test]
fn run_document_shows_blame_only_when_measured() {
    let plain = RunDocument::new(&table_ix()[0], None, crate::report::ttpv2::paragraph::text);
    assert!(!Run(plain).text().contains("Contention blame per QE"));
    let mut qc = table_ix()[0].clone();
    qc.qes[1].blame_error = Some("the victim exited before the first window".into());
    let shown = load(
        serde_json::to_value(RunDocument::new(
            &qc,
            None,
            crate::report::ttpv2::paragraph::text,
        ))
        .unwrap(),
    )
    .unwrap();
    let text = shown.text();
    let at = text
        .find("Contention blame per QE")
        .unwrap_or_else(|| panic!("{text}"));
    let qe = qc.qes[1].qe;
    assert!(
        text[at..].contains(&format!(
            "  QE {qe}: no blame: the victim exited before the first window\n"
        )),
        "{text}"
    );
}

fn attach_doc() -> Value {
    json!({
        "schema": "ttp.attach/1",
        "window": {"start_ns": 1_000_000_000u64, "end_ns": 3_500_000_000u64, "duration_ns": 2_500_000_000u64},
        "lost": {"kernel": {
            "exit_records_lost": 0, "thread_map_full": 0, "read_failed": 0, "lock_contended": 0,
            "request_map_full": 0, "proc_disk_map_full": 0, "cpu_out_of_range": 0, "switches": 900,
            "wakeups_unseen": 0, "exit_records": 2}, "taskstats_listener_overflows": 0},
        "processes": [{
            "pid": 4242, "comm": "psql, copy", "exited": false, "threads": 2,
            "kernel": {
                "on_cpu_ns": 12_345_678u64, "runq_wait_ns": 1_000_000, "sleep_ns": 2_000_000_000u64,
                "blocked_ns": 0, "iowait_ns": 400_000_000, "iowait_own_ns": 300_000_000,
                "iowait_share_ns": 100_000_000, "voluntary_switches": 40, "involuntary_switches": 3,
                "wakeups": 40,
                "io": {"read_requests": 32, "read_bytes": 33_554_432u64, "write_requests": 0,
                       "write_bytes": 0, "device_ns": 350_000_000, "queue_ns": 1_000_000}},
            "agreement": [{"measure": "on_cpu_ns", "ledger": 12_345_678u64, "reference": "schedstat",
                           "kernel": 12_300_000u64, "rel_diff": 0.0037, "tolerance": 2_000_000,
                           "within": true}]
        }],
        "overall": {"kernel": {"cpus": [{"cpu": 0}, {"cpu": 1}],
                               "total": {"busy_ns": 900_000_000, "idle_ns": 4_000_000_000u64, "iowait_ns": 100_000_000}},
                    "agreement": []},
        "notes": ["a note"]
    })
}

/// Hand-written attach summary. Catches ns shown as the wrong unit in the
/// terminal report (12.35 ms) and in tables (12.346 ms), a comm with a
/// comma breaking the CSV row, and the chart not written.
#[test]
fn attach_summary_renders_every_format() {
    let r = load(attach_doc()).unwrap();
    let text = r.text();
    assert!(text.starts_with("== summary over 2.500 s =="), "{text}");
    assert!(text.contains("pid 4242 (psql, copy), 2 thread(s): on-CPU 12.35 ms"));
    assert!(text.contains("iowait 400.00 ms (own I/O 300.00 ms"));
    assert!(text.contains("[  ok] on_cpu_ns"));
    assert!(text.contains("note: a note"));
    let csv = r.table().csv();
    let row = csv.lines().nth(1).unwrap();
    assert!(
        row.starts_with(
            "4242,\"psql, copy\",2,12.346,1.000,0.000,2000.000,0.000,400.000,300.000,100.000,,32,33554432,"
        ),
        "{row}"
    );
    let md = r.markdown();
    assert!(md.contains("| 4242 | psql, copy | 2 | 12.346 |"), "{md}");
    assert!(
        md.contains("Machine: busy 900.000 ms, idle 4000.000 ms, iowait 100.000 ms over 2 CPUs")
    );
    let dir = tmpdir("attach");
    let files = r.plots(&dir).unwrap();
    let svg = std::fs::read_to_string(&files[0]).unwrap();
    assert!(svg.contains("psql, copy (4242)") && svg.contains("on CPU"));
    std::fs::remove_dir_all(&dir).ok();
}

/// A trace file read back adds up its own slices. Catches µs read as ns
/// and the I/O rows' requests not credited to the thread that submitted
/// them.
#[test]
fn trace_file_summarises_threads() {
    use crate::report::trace::Trace;
    use ttp_ledger::probe::{BlockPhase, ThreadState, TraceBody, TraceEvent};
    use ttp_window::window::trace_record::{Recording, Seed};
    let t0 = 5_000_000_000;
    let ev = |ts, body| TraceEvent {
        ts_ns: t0 + ts,
        tid: 7,
        tgid: 7,
        cpu: 0,
        body,
    };
    let blk = |ts, phase| {
        ev(
            ts,
            TraceBody::Block {
                phase,
                rq: 1,
                sector: 0,
                bytes: 65536,
                op: 0,
                dev_major: 0,
                dev_minor: 0,
            },
        )
    };
    let rec = Recording {
        start_ns: t0,
        end_ns: t0 + 10_000_000,
        events: vec![
            ev(1_000_000, TraceBody::SwitchIn { prev_tid: 0 }),
            blk(3_000_000, BlockPhase::Submit),
            ev(
                3_500_000,
                TraceBody::SwitchOut {
                    state: ThreadState::IoWait,
                    next_tid: 0,
                    preempt: false,
                    prev_state: 2,
                },
            ),
            blk(3_600_000, BlockPhase::Issue),
            blk(5_000_000, BlockPhase::Complete),
            ev(5_100_000, TraceBody::Wakeup { new: false }),
        ],
        seeds: vec![Seed {
            tid: 7,
            tgid: 7,
            state: ThreadState::Runnable,
            since_ns: t0,
            comm: "reader".into(),
        }],
        ..Default::default()
    };
    let bytes = Trace::new(rec, "ttp attach").to_bytes();
    let r = load(serde_json::from_slice(&bytes).unwrap()).unwrap();
    let t = r.table();
    assert_eq!(t.rows.len(), 1);
    // Runnable 0–1 ms and 5.1–10 ms, running 1–3.5 ms, I/O wait 3.5–5.1 ms.
    assert_eq!(
        t.rows[0],
        [
            "7", "7", "reader", "reader", "2.500", "5.900", "0.000", "0.000", "1.600", "1", "65536"
        ]
    );
}

/// Catches a file without a schema, or of an unknown kind, being rendered
/// as something else.
#[test]
fn unknown_or_missing_schema_is_refused() {
    assert!(matches!(load(json!({"a": 1})), Err(RenderError::NoSchema)));
    match load(json!({"schema": "ttp.future/9"})) {
        Err(RenderError::UnknownSchema { schema, known }) => {
            assert_eq!(schema, "ttp.future/9");
            assert!(known.contains("ttp.attach/1"));
        }
        other => panic!("{:?}", other.err()),
    }
    assert!(matches!(
        load(json!({"schema": "ttp.attach/1", "processes": 3})),
        Err(RenderError::Invalid { .. })
    ));
}

/// Catches CSV fields with quotes or commas left unquoted, and Markdown
/// cells that break the table.
#[test]
fn table_escapes_csv_and_markdown() {
    let mut t = Table::new(&["name", "ms"]);
    t.push(vec!["a \"b\", c".into(), "1.5".into()]);
    t.push(vec!["x|y".into(), "".into()]);
    assert_eq!(t.csv(), "name,ms\n\"a \"\"b\"\", c\",1.5\nx|y,\n");
    assert_eq!(
        t.markdown(),
        "| name | ms |\n|:---|---:|\n| a \"b\", c | 1.5 |\n| x\\|y |  |\n"
    );
}

/// An EMP outcome (the calibration tests' synthetic runs) renders with
/// EMP's own terminal report, one row per run. Catches the verdict of a
/// dropped run lost in the table.
#[test]
fn emp_outcome_renders_with_its_module() {
    use ttp_emp::{
        EmpConfig, apply,
        calibrate::{CalibrationConfig, analyze, build_profile, tests::synthetic_runs},
    };
    let runs = synthetic_runs();
    let p = build_profile(
        analyze(&[], &runs, &CalibrationConfig::default()).unwrap(),
        None,
        2.0,
    );
    let o = apply(&runs, Some(&p), &EmpConfig::default()).unwrap();
    let r = load(serde_json::to_value(&o).unwrap()).unwrap();
    assert_eq!(r.text(), crate::report::emp::terminal::render_outcome(&o));
    let t = r.table();
    assert_eq!(t.rows.len(), o.runs.len());
    let run10 = t.rows.iter().find(|row| row[0] == "10").unwrap();
    assert!(run10[3].starts_with("daemon cut-off: bash["), "{run10:?}");
    let profile = load(serde_json::to_value(&p).unwrap()).unwrap();
    assert_eq!(
        profile.text(),
        crate::report::emp::terminal::render_calibration(&p)
    );
}

/// The Markdown headline of an EMP outcome: the mean and sd of the
/// retained runs with three decimals, and in words when no run was
/// retained. Catches "mean of 0 retained runs:  ms, sd  ms.".
#[test]
fn emp_markdown_headline_with_and_without_retained_runs() {
    use ttp_emp::{
        EmpConfig, apply,
        calibrate::{CalibrationConfig, analyze, build_profile, tests::synthetic_runs},
    };
    let runs = synthetic_runs();
    let p = build_profile(
        analyze(&[], &runs, &CalibrationConfig::default()).unwrap(),
        None,
        2.0,
    );
    let mut o = apply(&runs, Some(&p), &EmpConfig::default()).unwrap();
    let pt = o.pt.unwrap();
    let md = load(serde_json::to_value(&o).unwrap()).unwrap().markdown();
    let want = format!(
        "Process time (mean of {} retained runs): {:.3} ms, sd {:.3} ms.",
        pt.n,
        pt.mean_ns / 1e6,
        pt.sd_ns.unwrap() / 1e6
    );
    assert!(md.contains(&want), "{md}");
    o.pt = None;
    let md = load(serde_json::to_value(&o).unwrap()).unwrap().markdown();
    assert!(md.contains("Process time: no run was retained"), "{md}");
    assert!(!md.contains(" ms, sd"), "{md}");
}

/// The example blame recording analysed, saved and read back gives the
/// same report and one row per culprit; its graph goes out as DOT.
#[test]
fn blame_report_renders_with_its_module() {
    use ttp_blame::Recording;
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/blame-recording.json");
    let rec: Recording = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let report = ttp_blame::analyze(&rec, &Default::default()).unwrap();
    let r = load(serde_json::to_value(&report).unwrap()).unwrap();
    assert_eq!(r.text(), crate::report::blame::blame_text(&report, 10));
    assert_eq!(r.table().rows.len(), report.culprits.len());
    let dir = tmpdir("blame");
    let files = r.plots(&dir).unwrap();
    assert!(
        std::fs::read_to_string(&files[0])
            .unwrap()
            .starts_with("digraph")
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Hand-written load summary. Catches ns percentiles shown as µs wrongly
/// (2_500_000 ns = 2500 µs) and an empty distribution shown as 0 latency.
#[test]
fn load_summary_renders_percentiles() {
    let stats = |count: u64, p99: u64| {
        json!({"count": count, "min_ns": 1000, "mean_ns": 1500.5, "stddev_ns": 1.0, "max_ns": 2_600_000,
               "percentiles_ns": {"50": 1500, "90": 2000, "99": p99, "99.9": 2_550_000, "99.99": 2_600_000}})
    };
    let doc = json!({
        "schema": "ttp.load/1", "target": {"kind": "sim"}, "clock": "virtual",
        "requested_rate_per_s": 100.0, "arrivals": "uniform", "seed": 1, "warmup_s": 1.0,
        "duration_s": 10.0, "grace_s": 1.0, "timeout_s": null, "max_in_flight": 100, "connections": 1,
        "phases": [{"model": "open", "scheduled": 1000, "sent": 1000, "completed_ok": 1000, "failed": 0,
                    "omitted": 0, "errors": {}, "error_total": 0, "requested_rate_per_s": 100.0,
                    "sent_rate_per_s": 100.0, "achieved_rate_per_s": 99.9, "elapsed_s": 10.0,
                    "send_lag_ns": stats(1000, 0),
                    "series": {"open_latency": stats(1000, 2_500_000), "open_service_time": stats(0, 0)},
                    "timeline": [], "samplers": {}}],
        "expected_open_latency_ns": null, "files": {"hgrm": [], "svg": null}
    });
    let r = load(doc).unwrap();
    let t = r.table();
    let lat = t.rows.iter().find(|row| row[1] == "open_latency").unwrap();
    assert_eq!(lat[6], "2500.000", "p99 in µs: {lat:?}");
    let text = r.text();
    let p99 = text.lines().find(|l| l.starts_with("p99 ")).unwrap();
    assert!(
        p99.contains("2.50ms") && p99.trim_end().ends_with('-'),
        "{p99}"
    );
}
