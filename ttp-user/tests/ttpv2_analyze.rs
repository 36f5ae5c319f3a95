//! `ttp-ebpf analyze` end to end: the binary on the paper's worked example
//! (CSV path) and on saved run JSONs at several cardinalities.
use std::path::{Path, PathBuf};
use std::process::Command;

use ttp_ttpv2::{QcInput, RunDocument, Setup};
use ttp_window::window::record::{
    Measures, OverallMeasures, ProcessClass, ProcessMeasures, QeRecord,
};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ttp-ebpf"))
}

/// A fresh directory for one test, removed when dropped.
struct TmpDir(PathBuf);

impl TmpDir {
    fn new(test: &str) -> TmpDir {
        let dir =
            std::env::temp_dir().join(format!("ttp-analyze-it-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TmpDir(dir)
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Table IX's eight retained QEs through `analyze --qe-csv` give Table XV
/// and the median Time_calc of 1992.5 ms (Sec. 10). Catches a break
/// anywhere between the CSV reader, the protocol and the JSON writer.
#[test]
fn table_ix_through_the_cli() {
    let csv =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/ttpv2/table_ix.csv");
    let dir = TmpDir::new("table_ix");
    let out = dir.join("table_ix.json");
    let o = bin()
        .args(["analyze", "--qe-csv"])
        .arg(&csv)
        .arg("--json")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("Time_calc 1992.5 ms ± 46.2 ms (relative error 2.3%)"),
        "{stdout}"
    );
    let v = read_json(&out);
    assert_eq!(v["schema"], "ttp.analyze/1");
    let qc = &v["qcs"][0];
    assert_eq!(qc["result"]["time_calc_ms"], 1992.5);
    assert_eq!(qc["result"]["retained"], 8);
    let io: Vec<f64> = qc["qes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["io_calc_ticks"].as_f64().unwrap())
        .collect();
    assert_eq!(io, vec![37.0, 36.5, 47.5, 37.5, 39.5, 35.0, 37.0, 37.5]);
    let t: Vec<f64> = qc["qes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["time_calc_ms"].as_f64().unwrap())
        .collect();
    assert_eq!(
        t,
        vec![
            2000.0, 1975.0, 2115.0, 1985.0, 2005.0, 1970.0, 1990.0, 1995.0
        ]
    );
}

/// A Q@C of 8 QEs whose query runs `u` user ticks (S 5, BlockIO 20,
/// IOWait 10), as the `run` command would record it.
fn run_at(cardinality: u32, u: u64) -> QcInput {
    let qes = (1..=8)
        .map(|i| {
            let mut qe = QeRecord::new(i, (u + 40) as f64 * 10.0);
            qe.exit_code = Some(0);
            qe.timed_out = Some(false);
            qe.processes.push(ProcessMeasures {
                pid: Some(100 + i),
                start_time_ns: Some(1),
                comm: "query".into(),
                class: ProcessClass::Query,
                stopped: true,
                m: Measures {
                    u_ticks: Some(u + u64::from(i % 3)),
                    s_ticks: Some(5),
                    blkio_ticks: Some(20),
                    ..Measures::default()
                },
            });
            qe.overall = OverallMeasures {
                user_ticks: Some(u + 3),
                system_ticks: Some(6),
                iowait_ticks: Some(10),
                ..OverallMeasures::default()
            };
            qe
        })
        .collect();
    QcInput {
        labels: [("cardinality".to_string(), cardinality.to_string())].into(),
        source: None,
        command: vec!["./query".into()],
        setup: Setup {
            qes_requested: Some(8),
            ..Setup::default()
        },
        qes,
    }
}

/// Three saved runs at cardinalities 100, 200, 300 where 200 is slower
/// than 300: one strict monotonicity violation out of two adjacent pairs,
/// before (QC3) and after (POST2) the drops. Catches runs analysed one by
/// one instead of as one experiment.
#[test]
fn saved_runs_get_monotonicity_checks() {
    let dir = TmpDir::new("saved_runs");
    let mut files = Vec::new();
    for (card, u) in [(100, 50), (200, 200), (300, 150)] {
        let path = dir.join(&format!("run-{card}.json"));
        let doc = RunDocument::new(
            &run_at(card, u),
            None,
            ttp_user::report::ttpv2::paragraph::text,
        );
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        files.push(path);
    }
    let out = dir.join("three.json");
    let o = bin()
        .arg("analyze")
        .args(&files)
        .arg("--json")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = read_json(&out);
    let check = |id: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()
            .clone()
    };
    for id in ["QC3", "POST2"] {
        assert_eq!(check(id)["violations"], 1, "{id}: {}", check(id));
        // Table XII counts Q@Cs: the three compared, over two adjacent pairs.
        assert_eq!(check(id)["evaluated"], 3, "{id}");
        assert!(
            check(id)["note"]
                .as_str()
                .unwrap_or("")
                .contains("of 2 adjacent pair"),
            "{id}: {}",
            check(id)
        );
    }
    assert_eq!(v["qcs"].as_array().unwrap().len(), 3);
}

/// Bad input is a usage error (exit 2) with a message saying what to do.
#[test]
fn usage_errors() {
    let o = bin().arg("analyze").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--qe-csv"));
    let dir = TmpDir::new("usage");
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "qe,time_meas_ms\n1,2\n").unwrap();
    let o = bin()
        .args(["analyze", "--qe-csv"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("required column `u_ticks` is missing"));
}
