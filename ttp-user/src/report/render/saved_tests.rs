//! Files written before a schema gained fields still load and render the
//! same. The fixtures are real outputs of the version before the ledger
//! counters were declared once (`attach --duration 2s` of a `sleep`,
//! `run -n 3 -- dd … conv=fsync` with the daemons of each QE cut to four,
//! `analyze` of that run, `load --simulate --clock real --attach-pid` of a
//! `sleep`); the `.report.*` files are what that version's `report` printed
//! for them — the independent truth the text is compared with. One change
//! is deliberate: the attach summary's `lost: nothing` line became one line
//! in words per loss or repair counter that is not zero (report/losses.rs),
//! so attach-1.report.txt carries those lines, and a tally of its cross-check
//! above the processes; TTPv2 reports name the
//! command measured in their title; load reports add the send lag behind
//! schedule, computed from the send times the file already held, and are
//! laid out as `load` printed them: the target in words (its fields, for
//! files written before the line itself was saved), the two-line header,
//! each phase's errors, and the server's ledger per second the file held;
//! CSV and Markdown print every measured number with three decimals.
use serde_json::Value;

use super::*;

fn fixture(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/report/render/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn golden(name: &str) -> &'static str {
    match name {
        "attach-1.report.txt" => include_str!("fixtures/attach-1.report.txt"),
        "analyze-1.report.txt" => include_str!("fixtures/analyze-1.report.txt"),
        "load-1.report.txt" => include_str!("fixtures/load-1.report.txt"),
        "run-1.report.txt" => include_str!("fixtures/run-1.report.txt"),
        "run-1.report.csv" => include_str!("fixtures/run-1.report.csv"),
        "attach-1.report.csv" => include_str!("fixtures/attach-1.report.csv"),
        _ => unreachable!("{name}"),
    }
}

/// Every saved schema with ledger measures renders exactly as the version
/// that wrote it did. Catches a renamed JSON field (it would load as 0 or
/// unknown and change the numbers) and a field that became required.
#[test]
fn saved_files_of_every_ledger_schema_render_as_before() {
    for kind in ["attach", "analyze", "load", "run"] {
        let doc =
            load(fixture(&format!("{kind}-1.json"))).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(
            doc.text(),
            golden(&format!("{kind}-1.report.txt")),
            "{kind}"
        );
    }
    let run = load(fixture("run-1.json")).unwrap();
    assert_eq!(run.table().csv(), golden("run-1.report.csv"));
}

/// The attach table gained columns for counters the old table left out;
/// every column the old table had keeps its values.
#[test]
fn saved_attach_table_keeps_its_columns() {
    let doc = load(fixture("attach-1.json")).unwrap();
    let parse = |csv: &str| {
        let mut r = csv::Reader::from_reader(csv.as_bytes());
        let head: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
        let rows: Vec<Vec<String>> = r
            .records()
            .map(|x| x.unwrap().iter().map(String::from).collect())
            .collect();
        (head, rows)
    };
    let (old_head, old_rows) = parse(golden("attach-1.report.csv"));
    let (new_head, new_rows) = parse(&doc.table().csv());
    assert_eq!(old_rows.len(), new_rows.len());
    assert!(!old_rows.is_empty());
    for (i, col) in old_head.iter().enumerate() {
        let j = new_head
            .iter()
            .position(|h| h == col)
            .unwrap_or_else(|| panic!("{col} gone"));
        for (o, n) in old_rows.iter().zip(&new_rows) {
            assert_eq!(o[i], n[j], "{col}");
        }
    }
}

/// A file written before a counter existed loads with the counter 0 (the
/// attach `kernel` measures) or unknown (the TTPv2 measures): every ledger
/// counter is `#[serde(default)]`. Simulated by removing two counters from
/// each process of the saved files.
#[test]
fn saved_files_without_a_counter_still_load() {
    let mut attach = fixture("attach-1.json");
    for p in attach["processes"].as_array_mut().unwrap() {
        let k = p["kernel"].as_object_mut().unwrap();
        assert!(k.remove("wakeups").is_some());
        assert!(
            k["io"]
                .as_object_mut()
                .unwrap()
                .remove("queue_ns")
                .is_some()
        );
    }
    let doc = load(attach).unwrap();
    assert_eq!(doc.text(), golden("attach-1.report.txt"));

    let mut run = fixture("run-1.json");
    let mut removed = 0;
    for qe in run["qes"].as_array_mut().unwrap() {
        for p in qe["processes"].as_array_mut().unwrap() {
            removed += p.as_object_mut().unwrap().remove("iowait_own_ns").is_some() as u32;
        }
    }
    assert!(removed > 0);
    load(run).unwrap().text();
}

/// The attach document is one type both ways: a saved file read and written
/// again keeps every field it had, with the same value, and adds only the
/// counters the file predates, as 0. Catches a field the reader drops or
/// changes.
#[test]
fn saved_attach_document_round_trips() {
    let saved = fixture("attach-1.json");
    let doc: attach::AttachDoc = serde_json::from_value(saved.clone()).unwrap();
    // Numbers compared by value (the fixture was compacted by jq, which
    // writes 0.0 as 0).
    fn by_value(v: Value) -> Value {
        match v {
            Value::Number(n) => n.as_f64().map(Value::from).unwrap_or(Value::Null),
            Value::Array(a) => a.into_iter().map(by_value).collect(),
            Value::Object(o) => o.into_iter().map(|(k, v)| (k, by_value(v))).collect(),
            v => v,
        }
    }
    let written = by_value(serde_json::to_value(&doc).unwrap());
    let mut extra = Vec::new();
    covers(&by_value(saved), &written, "", &mut extra);
    // The counters newer than the fixture: /proc's TTPv2 Sec. 3.5 measures,
    // not known for the file (null), and ledger counters (the wake latency
    // among them), each 0. The ledger's are checked against the one counter
    // list (for_each_ledger_counter!), so that adding a counter needs no
    // edit here (docs/architecture.md, "Adding a ledger counter").
    const PROC_NEWER: [&str; 6] = [
        "guest_ticks",
        "cguest_ticks",
        "minflt",
        "majflt",
        "read_syscalls",
        "write_syscalls",
    ];
    assert!(
        extra
            .iter()
            .any(|(p, _)| p.ends_with(".kernel.wake_latency_ns"))
    );
    for (path, v) in &extra {
        if PROC_NEWER
            .iter()
            .any(|f| path.ends_with(&format!(".proc.{f}")))
        {
            assert_eq!(v, &Value::Null, "{path}");
            continue;
        }
        let name = path.rsplit('.').next().unwrap_or_default();
        // Loss, repair and request counters newer than the fixture read as 0.
        if [
            ".lost.kernel.requests_ended_at_reuse",
            ".lost.kernel.irq_capped",
            ".lost.kernel.requests_in_overflow",
        ]
        .contains(&path.as_str())
        {
            assert_eq!(v, &Value::from(0.0), "{path}");
            continue;
        }
        assert!(
            path.contains(".kernel.") && ttp_ledger::accounts::LedgerColumns::NAMES.contains(&name),
            "{path} added"
        );
        assert_eq!(v, &Value::from(0.0), "{path}");
    }
}

/// Walks `saved` and asserts `written` has each of its fields with the same
/// value; collects the fields `written` has beyond them.
fn covers(saved: &Value, written: &Value, path: &str, extra: &mut Vec<(String, Value)>) {
    match (saved, written) {
        (Value::Object(s), Value::Object(w)) => {
            for (k, v) in s {
                let p = format!("{path}.{k}");
                let wv = w.get(k).unwrap_or_else(|| panic!("{p} dropped"));
                covers(v, wv, &p, extra);
            }
            for (k, v) in w {
                if !s.contains_key(k) {
                    extra.push((format!("{path}.{k}"), v.clone()));
                }
            }
        }
        (Value::Array(s), Value::Array(w)) => {
            assert_eq!(s.len(), w.len(), "{path}");
            for (i, (a, b)) in s.iter().zip(w).enumerate() {
                covers(a, b, &format!("{path}[{i}]"), extra);
            }
        }
        (s, w) => assert_eq!(s, w, "{path}"),
    }
}
