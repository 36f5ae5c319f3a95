//! `compare` on saved files built from the recorded fixtures, the
//! refusals, and the command's outputs.
use super::*;
use serde_json::{Value, json};
use ttp_compare::Outcome;
use ttp_ttpv2::analysis::{RunDocument, SavedRun};

const RUN_FIXTURE: &str = include_str!("../report/render/fixtures/run-1.json");

/// Query CPU ticks (U + S) of twelve QEs: 160 ± a few ticks (sd 2.8
/// ticks, 1.7 %), a spread that hides a 1 % change and not a 5 % one.
const BASE_TICKS: [i64; 12] = [160, 163, 158, 165, 161, 156, 162, 159, 164, 157, 160, 162];

/// A saved `ttp.run/1` built from the recorded dd run (its machine
/// facts, process list and process sets), each QE's query made to take
/// `scale` × BASE_TICKS[i] ticks of CPU: U and S in ticks, the ledger's
/// on-CPU time to the same ns, Time_meas 20 ms more, and the overall
/// /proc/stat ticks the sum of the processes'. The protocol (Steps 2–5)
/// is applied to it as `run` does.
fn scaled_run(scale: f64) -> Value {
    let (qc, machine) = scaled_qc(scale);
    serde_json::to_value(RunDocument::new(
        &qc,
        machine.as_ref(),
        crate::report::ttpv2::paragraph::text,
    ))
    .unwrap()
}

fn scaled_qc(
    scale: f64,
) -> (
    ttp_ttpv2::model::QcInput,
    Option<ttp_ledger::collect::machine::MachineFacts>,
) {
    let fixture: Value = serde_json::from_str(RUN_FIXTURE).unwrap();
    let template = fixture["qes"][0].clone();
    let mut qes = Vec::new();
    for (i, ticks) in BASE_TICKS.iter().enumerate() {
        let cpu = (*ticks as f64 * scale).round() as u64;
        let (u, s) = (cpu - cpu / 10, cpu / 10);
        let mut qe = template.clone();
        qe["qe"] = json!(i + 1);
        qe["time_meas_ms"] = json!(cpu as f64 * 10.0 + 20.0);
        qe["time_meas_ns"] = json!(cpu * 10_000_000 + 20_000_000);
        let (mut all_u, mut all_s) = (0, 0);
        for p in qe["processes"].as_array_mut().unwrap() {
            if p["class"] == "query" {
                p["u_ticks"] = json!(u);
                p["s_ticks"] = json!(s);
                p["on_cpu_ns"] = json!(cpu * 10_000_000);
                for k in [
                    "blkio_ticks",
                    "iowait_ns",
                    "iowait_own_ns",
                    "iowait_share_ns",
                ] {
                    p[k] = json!(0);
                }
            }
            all_u += p["u_ticks"].as_u64().unwrap();
            all_s += p["s_ticks"].as_u64().unwrap();
        }
        qe["overall"]["user_ticks"] = json!(all_u);
        qe["overall"]["system_ticks"] = json!(all_s);
        qe["overall"]["iowait_ticks"] = json!(0);
        qe["overall"]["iowait_ns"] = json!(0);
        qes.push(qe);
    }
    let mut saved = fixture.clone();
    saved["qes"] = json!(qes);
    saved["setup"]["qes_requested"] = json!(BASE_TICKS.len());
    let saved: SavedRun = serde_json::from_value(saved).unwrap();
    saved.into_input()
}

/// An analysis of two Q@Cs labelled cardinality=1 and 2, built like
/// [`scaled_run`], the second Q@C twice as long.
fn scaled_analysis(scale: f64, order: [u32; 2]) -> Value {
    let mut qcs = Vec::new();
    let mut machine = None;
    for card in order {
        let (mut qc, m) = scaled_qc(scale * f64::from(card));
        qc.labels.insert("cardinality".into(), card.to_string());
        qcs.push(qc);
        machine = m;
    }
    let a = analyse(
        &qcs,
        machine.as_ref(),
        crate::report::ttpv2::paragraph::text,
    );
    serde_json::to_value(AnalyzeDocument {
        schema: ANALYZE_SCHEMA.into(),
        machine,
        qcs: a.qcs,
        checks: a.checks,
        paragraph: a.paragraph,
        correlations: None,
    })
    .unwrap()
}

/// Analyses of two Q@Cs each, the Q@Cs in a different order in B:
/// matched by their labels, each Q@C's measures compared, B 5 % faster
/// on every one. Catches Q@Cs matched by position or pooled together.
#[test]
fn analyses_are_compared_per_qc_by_labels() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &scaled_analysis(1.0, [1, 2]));
    let b = write(dir.path(), "b.json", &scaled_analysis(0.95, [2, 1]));
    let doc = ttp_compare::compare(&sides(&[&a, &b]), &Config::default()).unwrap();
    let ms = &doc.comparisons[0].measures;
    assert_eq!(ms.len(), 8, "{:?}", doc.comparisons[0].skipped);
    for m in ms {
        assert_eq!(
            m.verdict.outcome,
            Outcome::Faster,
            "{}: {}",
            m.measure,
            m.verdict.text
        );
        assert!((m.ratio.unwrap() - 0.95).abs() < 0.01, "{}", m.measure);
    }
    let calc2 = ms
        .iter()
        .find(|m| m.measure == "cardinality=2: time_calc_ms")
        .unwrap();
    assert!(calc2.baseline.centre > 3000.0, "{}", calc2.baseline.centre);
    // One Holm family per measure across the two Q@Cs.
    assert!(
        calc2.verdict.text.contains("Holm-adjusted over 2"),
        "{}",
        calc2.verdict.text
    );

    // The same Q@Cs as a study file of `experiment` (JSON lines): read,
    // analysed and matched to the analysis of A: no difference.
    use ttp_ttpv2::study::{STUDY_SCHEMA, Study, StudyHeader, StudyQc};
    let study_path = dir.path().join("study.jsonl");
    let (qc1, machine) = scaled_qc(1.0);
    let header = StudyHeader {
        schema: STUDY_SCHEMA.into(),
        kind: "header".into(),
        spec: json!({}),
        machine,
        created_unix_ns: 0,
    };
    let mut study = Study::create(&study_path, &header).unwrap();
    for card in [1u32, 2] {
        let mut qc = if card == 1 {
            qc1.clone()
        } else {
            scaled_qc(2.0).0
        };
        qc.labels.insert("cardinality".into(), card.to_string());
        study.append(&StudyQc::new(qc, None)).unwrap();
    }
    drop(study);
    let doc = ttp_compare::compare(&sides(&[&a, &study_path]), &Config::default()).unwrap();
    let ms = &doc.comparisons[0].measures;
    assert_eq!(ms.len(), 8);
    assert!(doc.comparisons[0].setup_differences.is_empty());
    for m in ms {
        assert_eq!(m.verdict.outcome, Outcome::NoDifference, "{}", m.measure);
        assert_eq!(m.ratio, Some(1.0));
    }
}

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
    p
}

fn sides(paths: &[&Path]) -> Vec<(String, Side)> {
    paths
        .iter()
        .map(|p| (p.display().to_string(), read_side(p).unwrap()))
        .collect()
}

/// Two saved runs whose query CPU time differs by a known 5 %: B is
/// called faster on Time_calc and the exact time, the interval of the
/// change contains 5 %, p < 0.01. Catches samples taken from dropped
/// QEs, the ratio inverted, or the verdict lost on real documents.
#[test]
fn saved_runs_five_percent_apart() {
    let dir = tempfile::tempdir().unwrap();
    let a_run = scaled_run(1.0);
    assert_eq!(
        a_run["result"]["retained"],
        json!(BASE_TICKS.len()),
        "the constructed QEs must pass the protocol: {}",
        a_run["qes"][0]["dropped_by"]
    );
    let a = write(dir.path(), "a.json", &a_run);
    let b = write(dir.path(), "b.json", &scaled_run(0.95));
    let doc = ttp_compare::compare(&sides(&[&a, &b]), &Config::default()).unwrap();
    let c = &doc.comparisons[0];
    assert!(c.setup_differences.is_empty(), "{:?}", c.setup_differences);
    for name in ["time_calc_ms", "time_exact_ms", "time_meas_ms"] {
        let m = c.measures.iter().find(|m| m.measure == name).unwrap();
        assert_eq!(m.baseline.n, BASE_TICKS.len());
        assert_eq!(
            m.verdict.outcome,
            Outcome::Faster,
            "{name}: {}",
            m.verdict.text
        );
        assert!(m.p_holm < 0.01, "{name}: p {}", m.p_holm);
        if name != "time_meas_ms" {
            // Time_meas carries a constant 20 ms, so its change is a
            // little under 5 %.
            let [lo, hi] = m.verdict.change_ci_percent.unwrap();
            assert!(lo < 5.0 && 5.0 < hi, "{name}: {lo}–{hi} %");
        }
    }
    // The same file twice: no difference on any measure.
    let doc = ttp_compare::compare(&sides(&[&a, &a]), &Config::default()).unwrap();
    for m in &doc.comparisons[0].measures {
        assert_eq!(
            m.verdict.outcome,
            Outcome::NoDifference,
            "{}",
            m.verdict.text
        );
        let ci = m.ci.as_ref().unwrap();
        assert!(ci.lower <= 1.0 && 1.0 <= ci.upper);
    }
}

/// The refusals: each is a usage error (exit 2) whose one
/// line names the file and says what to do.
#[test]
fn refusals_are_usage_errors_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let not_json = dir.path().join("x.json");
    std::fs::write(&not_json, "{ not json").unwrap();
    // The fixture as recorded: 3 QEs, all dropped by Step 2.
    let dropped = write(
        dir.path(),
        "dropped.json",
        &serde_json::from_str(RUN_FIXTURE).unwrap(),
    );
    let attach: Value =
        serde_json::from_str(include_str!("../report/render/fixtures/attach-1.json")).unwrap();
    let attach = write(dir.path(), "attach.json", &attach);
    let cases = [
        (not_json.clone(), "is not JSON"),
        (
            dropped,
            "0 retained QE(s) (the Q@C was dropped: Step 3 (iv)",
        ),
        (attach, "a ttp.attach/1 result cannot be compared"),
        (dir.path().join("missing.json"), "cannot read"),
    ];
    for (path, want) in cases {
        let e = read_side(&path).unwrap_err();
        let msg = format!("{e:#}");
        assert_eq!(ttp_sys::error::exit_code(&e), 2, "{msg}");
        assert!(msg.contains(want), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
        assert!(msg.starts_with(&path.display().to_string()) || msg.starts_with("cannot read"));
    }
    // Files of different kinds.
    let a = write(dir.path(), "a.json", &scaled_run(1.0));
    let emp = write(dir.path(), "emp.json", &emp_outcome(1.0));
    let args = Args {
        files: vec![a, emp],
        markdown: false,
        json: None,
        svg: None,
        seed: 1,
        resamples: 1000,
        confidence: 95.0,
        detect: 2.0,
        any_root: false,
    };
    let e = run(args).unwrap_err();
    assert_eq!(ttp_sys::error::exit_code(&e), 2);
    assert!(format!("{e:#}").ends_with("a ttp.emp/1 result: compare files of one kind"));
}

/// The EMP outcome of the calibration tests' 200 synthetic runs (no
/// profile: the ±2σ check only), every run's PT and ET × `scale`.
fn emp_outcome(scale: f64) -> Value {
    use ttp_emp::{EmpConfig, apply, calibrate::tests::synthetic_runs};
    let o = apply(&synthetic_runs(), None, &EmpConfig::default()).unwrap();
    let mut v = serde_json::to_value(o).unwrap();
    for r in v["runs"].as_array_mut().unwrap() {
        for k in ["pt_ns", "et_ns"] {
            if let Some(ns) = r[k].as_u64() {
                r[k] = json!((ns as f64 * scale).round() as u64);
            }
        }
    }
    v
}

/// EMP results 2 % apart: compared by the mean of the retained runs,
/// decided by Welch's test, the interval containing 2 %; the same
/// result twice shows no difference.
#[test]
fn saved_emp_results_two_percent_apart() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &emp_outcome(1.0));
    let b = write(dir.path(), "b.json", &emp_outcome(0.98));
    let doc = ttp_compare::compare(&sides(&[&a, &b]), &Config::default()).unwrap();
    let ms = &doc.comparisons[0].measures;
    assert_eq!(ms.len(), 2);
    for m in ms {
        assert_eq!(m.decided_by, "welch");
        assert_eq!(m.verdict.outcome, Outcome::Faster, "{}", m.verdict.text);
        let [lo, hi] = m.verdict.change_ci_percent.unwrap();
        assert!(lo < 2.0 && 2.0 < hi, "{}: {lo}–{hi} %", m.measure);
        assert!((m.ratio.unwrap() - 0.98).abs() < 1e-6);
    }
    let doc = ttp_compare::compare(&sides(&[&a, &a]), &Config::default()).unwrap();
    for m in &doc.comparisons[0].measures {
        assert_eq!(m.verdict.outcome, Outcome::NoDifference);
    }
}

/// The recorded load run, its timeline stretched to 30 measured
/// seconds (the first recorded second's latencies, ± up to 3 %) and
/// every latency × `scale`.
fn load_run(scale: f64) -> Value {
    let mut v: Value =
        serde_json::from_str(include_str!("../report/render/fixtures/load-1.json")).unwrap();
    let phase = &mut v["phases"][0];
    let rows = phase["timeline"].as_array().unwrap().clone();
    let timeline: Vec<Value> = (0..30)
        .map(|i| {
            let mut r = rows[0].clone();
            let wiggle = 1.0 + ((i * 7) % 13) as f64 / 12.0 * 0.06 - 0.03;
            r["second"] = json!(i);
            for k in ["latency_mean_ns", "latency_max_ns"] {
                let ns = r[k].as_u64().unwrap() as f64;
                r[k] = json!((ns * wiggle * scale).round() as u64);
            }
            r
        })
        .collect();
    phase["timeline"] = json!(timeline);
    for (_, st) in phase["series"].as_object_mut().unwrap() {
        let max = st["max_ns"].as_u64().unwrap() as f64;
        st["max_ns"] = json!((max * scale).round() as u64);
        for (_, p) in st["percentiles_ns"].as_object_mut().unwrap() {
            *p = json!((p.as_u64().unwrap() as f64 * scale).round() as u64);
        }
    }
    v
}

/// Load results 10 % apart in latency: compared per second (the
/// per-second mean and max latency over 30 seconds), B called slower
/// with an interval containing 10 %; the whole-run percentiles shown
/// side by side with their ratio. The recorded file itself, with 2
/// measured seconds, is compared but cannot show a difference.
#[test]
fn saved_load_results_ten_percent_apart() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &load_run(1.0));
    let b = write(dir.path(), "b.json", &load_run(1.1));
    let doc = ttp_compare::compare(&sides(&[&a, &b]), &Config::default()).unwrap();
    let c = &doc.comparisons[0];
    assert_eq!(c.measures.len(), 2);
    for m in &c.measures {
        assert_eq!(m.baseline.n, 30);
        assert_eq!(m.verdict.outcome, Outcome::Slower, "{}", m.verdict.text);
        let [lo, hi] = m.verdict.change_ci_percent.unwrap();
        assert!(lo < 10.0 && 10.0 < hi, "{}: {lo}–{hi} %", m.measure);
    }
    let p99 = c
        .whole_run
        .iter()
        .find(|w| w.name == "open_latency p99 (ms)")
        .unwrap();
    assert!((p99.baseline - 3.883007).abs() < 1e-9);
    assert!((p99.ratio.unwrap() - 1.1).abs() < 1e-6);
    let text = crate::report::compare::text(&doc);
    assert!(
        text.contains("whole-run numbers: one value per file"),
        "{text}"
    );

    let fixture = write(
        dir.path(),
        "fixture.json",
        &serde_json::from_str(include_str!("../report/render/fixtures/load-1.json")).unwrap(),
    );
    let doc = ttp_compare::compare(&sides(&[&fixture, &fixture]), &Config::default()).unwrap();
    for m in &doc.comparisons[0].measures {
        assert_eq!(m.baseline.n, 2);
        assert_eq!(m.verdict.outcome, Outcome::NoDifference);
    }
}

/// The whole command: `--json` writes a `ttp.compare/1` document
/// holding both sides' samples, the method with its seed, and the
/// verdict; `--svg` writes a plot per measure. Catches a document that
/// loses the samples or the seed, and options that are not applied.
#[test]
fn the_command_writes_json_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &scaled_run(1.0));
    let b = write(dir.path(), "b.json", &scaled_run(0.95));
    let out = dir.path().join("cmp.json");
    let plots = dir.path().join("plots");
    run(Args {
        files: vec![a.clone(), b.clone()],
        markdown: true,
        json: Some(out.clone()),
        svg: Some(plots.clone()),
        seed: 99,
        resamples: 2000,
        confidence: 90.0,
        detect: 1.0,
        any_root: false,
    })
    .unwrap();
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["schema"], "ttp.compare/1");
    assert_eq!(v["kind"], "ttp.run/1");
    assert_eq!(v["method"]["seed"], 99);
    assert_eq!(v["method"]["resamples"], 2000);
    assert_eq!(v["method"]["level"], 0.9);
    assert_eq!(v["method"]["power"], 0.8);
    let m = &v["comparisons"][0]["measures"][0];
    assert_eq!(m["measure"], "time_calc_ms");
    assert_eq!(m["baseline"]["samples"].as_array().unwrap().len(), 12);
    assert_eq!(m["ci"]["seed"], 99);
    assert_eq!(m["verdict"]["outcome"], "faster");
    assert!(m["verdict"]["text"].as_str().unwrap().contains("(90 % CI "));
    // One plot per measure: the three of TTPv2 and the exact time of
    // every QE.
    assert_eq!(std::fs::read_dir(&plots).unwrap().count(), 4);
    // `report` reads the document back and shows the same verdicts.
    let shown = crate::report::render::load(v.clone()).unwrap();
    let verdict = m["verdict"]["text"].as_str().unwrap();
    assert!(shown.text().contains(verdict), "{}", shown.text());
    assert_eq!(shown.table().rows.len(), 4);

    // Options out of range are usage errors.
    for (confidence, detect, resamples) in [(100.0, 2.0, 1000), (95.0, 0.0, 1000), (95.0, 2.0, 10)]
    {
        let e = run(Args {
            files: vec![a.clone(), b.clone()],
            markdown: false,
            json: None,
            svg: None,
            seed: 1,
            resamples,
            confidence,
            detect,
            any_root: false,
        })
        .unwrap_err();
        assert_eq!(ttp_sys::error::exit_code(&e), 2, "{e:#}");
        assert!(format!("{e:#}").starts_with("--"), "{e:#}");
    }
}

/// A `run` of two commands at two values of a scanned parameter, as its
/// one `ttp.analyze/1` file: `compare FILE` compares the commands at each
/// value (the second command 5 % faster everywhere), matching Q@Cs by the
/// parameter, not by position; a file of one command is refused in one
/// line. Catches commands pooled together, values crossed, and the
/// one-file form accepting a file it cannot split.
#[test]
fn one_file_of_several_commands() {
    use ttp_ttpv2::model::NAME_LABEL;
    let mut qcs = Vec::new();
    let mut machine = None;
    for (name, scale) in [("old", 1.0), ("new", 0.95)] {
        // `new` lists its values in the other order.
        let values: [u32; 2] = if name == "old" { [1, 2] } else { [2, 1] };
        for rows in values {
            let (mut qc, m) = scaled_qc(scale * f64::from(rows));
            qc.labels.insert(NAME_LABEL.into(), name.into());
            qc.labels.insert("rows".into(), rows.to_string());
            qc.setup.parameter = Some("rows".into());
            qcs.push(qc);
            machine = m;
        }
    }
    let doc = crate::cli::run_several::document(&qcs, machine.as_ref().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "run.json", &serde_json::to_value(&doc).unwrap());
    let sides = commands_of(&path).unwrap();
    let names: Vec<&str> = sides.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["old", "new"]);
    let cmp = ttp_compare::compare(&sides, &Config::default()).unwrap();
    let ms = &cmp.comparisons[0].measures;
    assert_eq!(ms.len(), 8, "{:?}", cmp.comparisons[0].skipped);
    for m in ms {
        assert_eq!(
            m.verdict.outcome,
            Outcome::Faster,
            "{}: {}",
            m.measure,
            m.verdict.text
        );
        assert!((m.ratio.unwrap() - 0.95).abs() < 0.01, "{}", m.measure);
        let [lo, hi] = m.verdict.change_ci_percent.unwrap();
        assert!(lo < 5.0 && 5.0 < hi, "{}: {lo}–{hi}", m.measure);
    }
    let at2 = ms
        .iter()
        .find(|m| m.measure == "rows=2: time_calc_ms")
        .unwrap();
    assert!(at2.baseline.centre > 3000.0, "{}", at2.baseline.centre);
    // `report FILE` shows the comparison after the analysis, as `run`
    // printed it, in text and Markdown.
    let shown = crate::report::render::load(serde_json::to_value(&doc).unwrap()).unwrap();
    let text = shown.text();
    let verdict = &ms[0].verdict.text;
    assert!(
        text.contains("Comparison of the commands") && text.contains(verdict.as_str()),
        "{text}"
    );
    assert!(shown.markdown().contains("**Comparison of the commands**"));
    // The run's own comparison is the same document.
    assert_eq!(
        crate::cli::run_several::comparison(&doc)
            .unwrap()
            .comparisons,
        cmp.comparisons
    );
    // The parameter orders the Q@Cs of each command: QC3/QC4 evaluated,
    // as percent of the 4 Q@Cs (Table XII), over one adjacent pair of
    // values a command.
    for id in ["QC3", "QC4"] {
        let c = doc.checks.iter().find(|c| c.id == id).unwrap();
        assert_eq!(
            (c.violations, c.evaluated),
            (Some(0), Some(4)),
            "{id}: {c:?}"
        );
        assert!(
            c.note
                .as_deref()
                .is_some_and(|n| n.contains("of 2 adjacent pair")),
            "{id}: {c:?}"
        );
    }

    // One command only: nothing to compare in one file.
    let one = crate::cli::run_several::document(&qcs[..2], machine.as_ref().unwrap());
    let path = write(dir.path(), "one.json", &serde_json::to_value(&one).unwrap());
    let e = commands_of(&path).unwrap_err();
    assert!(ttp_sys::error::exit_code(&e) == 2, "{e}");
    assert!(e.to_string().contains("compare needs two files"), "{e}");
    let run = write(dir.path(), "run1.json", &scaled_run(1.0));
    assert!(commands_of(&run).is_err());
}

/// Two commands of one run whose every QE Step 2 dropped (QE9: the
/// machine's IOWait above the query's BlockIO, as another tenant's I/O
/// makes it): no TTPv2 result, so the retained measures are listed as not
/// compared, and the exact time of every QE that ran still says the
/// second is 5 % faster; two separate run files of the same Q@Cs are
/// refused (fewer than 2 retained QEs). Catches dropped QEs leaking into
/// the retained measures, and a run whose comparison vanishes on a busy
/// machine.
#[test]
fn dropped_commands_are_compared_on_the_exact_time_of_every_qe() {
    use ttp_ttpv2::model::NAME_LABEL;
    let dir = tempfile::tempdir().unwrap();
    let mut qcs = Vec::new();
    let mut machine = None;
    for (name, scale) in [("old", 1.0), ("new", 0.95)] {
        let (mut qc, m) = scaled_qc(scale);
        qc.labels.insert(NAME_LABEL.into(), name.into());
        for q in &mut qc.qes {
            q.overall.iowait_ticks = Some(1000);
        }
        let path = write(
            dir.path(),
            &format!("{name}.json"),
            &serde_json::to_value(RunDocument::new(
                &qc,
                m.as_ref(),
                crate::report::ttpv2::paragraph::text,
            ))
            .unwrap(),
        );
        let e = read_side(&path).unwrap_err();
        assert_eq!(ttp_sys::error::exit_code(&e), 2, "{e}");
        qcs.push(qc);
        machine = m;
    }
    let doc = crate::cli::run_several::document(&qcs, machine.as_ref().unwrap());
    assert!(doc.qcs.iter().all(|q| q.result.retained == 0));
    let cmp = crate::cli::run_several::comparison(&doc).unwrap();
    let c = &cmp.comparisons[0];
    let names: Vec<&str> = c.measures.iter().map(|m| m.measure.as_str()).collect();
    assert_eq!(names, ["time_exact_all_ms"]);
    assert_eq!(c.skipped.len(), 3, "{:?}", c.skipped);
    let m = &c.measures[0];
    assert_eq!(m.baseline.n, BASE_TICKS.len());
    assert_eq!(m.verdict.outcome, Outcome::Faster, "{}", m.verdict.text);
    let [lo, hi] = m.verdict.change_ci_percent.unwrap();
    assert!(lo < 5.0 && 5.0 < hi, "{lo}–{hi} %");
}
