//! The lab's analysis, export and import against a real PostgreSQL lab
//! server started by the test (root; see common::root_or_skip and
//! common::pg): two workers with two host labels measure a spec of two
//! commands at two "cardinalities"; then `analyze --lab` must print what
//! `analyze` prints for the studies `lab export` wrote (the same TTPv2
//! code over the same Q@Cs), its JSON must hold exactly the QEs the lab's
//! rows hold (read with psql), and a study imported and exported again
//! must come back byte for byte.
use crate::common;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use common::{
    lab::{LabServer, assert_refused, spin_command, wait_or_kill},
    pg::{stderr, stdout, ttp},
    *,
};

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

const HOSTS: [&str; 2] = ["alpha", "beta"];

/// Two commands of fixture-spin, labelled as one query at two
/// cardinalities (20 and 40 ms of CPU), 6 QEs each: enough for Step 3 to
/// keep a Q@C and for the monotonicity checks to apply.
fn spec(dir: &Path) -> String {
    let mut s = format!(
        "name = \"scan\"\nhosts = [\"{}\", \"{}\"]\n",
        HOSTS[0], HOSTS[1]
    );
    for card in [20, 40] {
        let labels = format!("{{ query = \"spin\", cardinality = \"{card}\" }}");
        s += &spin_command(
            &format!("spin{card}"),
            card,
            6,
            Some(&dir.join(format!("s{card}"))),
            &labels,
        );
    }
    s
}

/// The analyze document without the `source` of each Q@C (a file name or
/// the lab), which is all that may differ between the two.
fn without_sources(mut v: serde_json::Value) -> serde_json::Value {
    for qc in v["qcs"].as_array_mut().unwrap() {
        qc.as_object_mut().unwrap().remove("source");
    }
    v
}

#[test]
fn analyze_lab_equals_analyze_of_the_exported_studies() {
    if !root_or_skip("analyze_lab_equals_analyze_of_the_exported_studies") {
        return;
    }
    let _serial = serial();
    let lab = LabServer::initialised("labstudy");
    let (c, url, dir) = (&lab.c, &lab.url, &lab.dir);
    lab.submit(&spec(dir));

    // Nothing is done yet: analyze says so and exits 2.
    assert_refused(
        &ttp(&["analyze", "--lab", url, "--experiment", "scan"]),
        "no finished Q@C",
    );
    // Progress followed while the workers run: not a terminal, so one
    // plain line per row that changed, and it ends by itself once nothing
    // is pending or running.
    let watch = Command::new(ttp_bin())
        .args(["lab", "status", "--lab", url, "--experiment", "scan"])
        .args(["--watch", "--interval", "200ms"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lab status --watch");
    let workers: Vec<_> = HOSTS.iter().map(|h| lab.worker(h, &["--once"])).collect();
    for w in workers {
        let o = w.wait_with_output().unwrap();
        assert!(o.status.success(), "worker: {}", stderr(&o));
    }
    assert_eq!(
        c.psql("SELECT count(*) FROM ttp_lab_tasks WHERE state = 'done'"),
        "4"
    );
    let o = wait_or_kill(watch, 60);
    let text = ok(o);
    assert!(
        !text.contains('\x1b'),
        "no terminal codes off a terminal: {text:?}"
    );
    for h in HOSTS {
        let mine: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(&format!(" scan {h}: ")))
            .collect();
        assert!(
            mine.first().is_some_and(|l| l.contains(": 0/2 finished")),
            "{h} starts with nothing finished: {text}"
        );
        assert!(
            mine.last()
                .is_some_and(|l| l
                    .contains(": 2/2 finished (2 done, 0 failed), 0 running, 0 pending, 12 QEs")),
            "{h} ends with both done: {text}"
        );
        // One line per change: no two equal lines in a row.
        let bodies: Vec<&str> = mine.iter().map(|l| l.split_once(' ').unwrap().1).collect();
        assert!(bodies.windows(2).all(|w| w[0] != w[1]), "{text}");
    }

    // Export: one study per host label, owned by the invoking user under
    // sudo (SUDO_UID/SUDO_GID of nobody here).
    let out = dir.join("export");
    let o = Command::new(ttp_bin())
        .args(["lab", "export", "--lab", url, "--experiment", "scan"])
        .arg("--out")
        .arg(&out)
        .arg("--json")
        .env("SUDO_UID", "65534")
        .env("SUDO_GID", "65534")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&ok(o)).unwrap();
    let files: Vec<PathBuf> = v["studies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| PathBuf::from(s["file"].as_str().unwrap()))
        .collect();
    assert_eq!(
        files,
        HOSTS.map(|h| out.join(format!("scan.{h}.study"))),
        "{v}"
    );
    for f in &files {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(f).unwrap();
        assert_eq!((m.uid(), m.gid()), (65534, 65534), "{}", f.display());
        // Header and two Q@Cs.
        let text = std::fs::read_to_string(f).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.lines().next().unwrap().contains("ttp.study/1"));
    }
    let fs: Vec<&str> = files.iter().map(|f| f.to_str().unwrap()).collect();

    // The check: analyze --lab prints what analyze of the
    // exported studies prints.
    let from_lab = ok(ttp(&["analyze", "--lab", url, "--experiment", "scan"]));
    let from_files = ok(ttp(&["analyze", fs[0], fs[1]]));
    assert_eq!(from_lab, from_files);
    assert!(from_lab.contains("TTPv2"), "{from_lab}");
    // Per host label: each section is analyze of that label's file.
    let by_host = ok(ttp(&[
        "analyze",
        "--lab",
        url,
        "--experiment",
        "scan",
        "--by-host",
    ]));
    for (h, f) in HOSTS.iter().zip(&fs) {
        let one = ok(ttp(&["analyze", f]));
        let head = format!("== experiment scan, host label {h} (2 Q@Cs) ==\n");
        let start = by_host.find(&head).expect("a section per host label") + head.len();
        assert_eq!(&by_host[start..start + one.len()], one, "host label {h}");
    }

    // The documents are equal too, and hold the lab's QEs: per Q@C, the
    // time of each QE equals its row in ttp_lab_qes (the finishing
    // attempt's), with the host label among its labels.
    let lab_json = dir.join("lab.json");
    let files_json = dir.join("files.json");
    ok(ttp(&[
        "analyze",
        "--lab",
        url,
        "--experiment",
        "scan",
        "--json",
        lab_json.to_str().unwrap(),
    ]));
    ok(ttp(&[
        "analyze",
        fs[0],
        fs[1],
        "--json",
        files_json.to_str().unwrap(),
    ]));
    let doc = without_sources(json_file(&lab_json));
    assert_eq!(doc, without_sources(json_file(&files_json)));
    let qcs = doc["qcs"].as_array().unwrap();
    assert_eq!(qcs.len(), 4, "2 commands × 2 host labels");
    for qc in qcs {
        let (h, card) = (
            qc["labels"]["host_label"].as_str().unwrap(),
            qc["labels"]["cardinality"].as_str().unwrap(),
        );
        let rows = c.psql(&format!(
            "SELECT q.record->>'time_meas_ms' FROM ttp_lab_qes q JOIN ttp_lab_tasks t ON t.id = q.task_id \
             JOIN ttp_lab_qc_results r ON r.task_id = t.id AND r.attempt = q.attempt \
             WHERE t.host_label = '{h}' AND t.key = 'spin{card}' ORDER BY q.qe"
        ));
        let times: Vec<f64> = qc["qes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q["time_meas_ms"].as_f64().unwrap())
            .collect();
        let lab_times: Vec<f64> = rows.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(times, lab_times, "{h} {card}");
        assert_eq!(times.len(), 6);
    }
    // Both host labels' Q@Cs of the query cover two cardinalities: the
    // monotonicity checks were applied, not skipped.
    let qc3 = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "QC3")
        .unwrap();
    assert!(qc3.get("na_reason").is_none(), "{qc3}");

    // Unknown experiment: one line, exit 2.
    assert_refused(
        &ttp(&["analyze", "--lab", url, "--experiment", "nope"]),
        "no experiment \"nope\"",
    );

    // Import → export: the study comes back byte for byte.
    let tasks_before = c.psql("SELECT count(*) FROM ttp_lab_tasks");
    let o = ok(ttp(&[
        "lab",
        "import",
        fs[0],
        "--lab",
        url,
        "--experiment",
        "scan-copy",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(
        (&v["qcs_imported"], &v["host_label"]),
        (&2.into(), &"alpha".into()),
        "{v}"
    );
    // Again: a no-op that says so.
    let o = ok(ttp(&[
        "lab",
        "import",
        fs[0],
        "--lab",
        url,
        "--experiment",
        "scan-copy",
    ]));
    assert!(o.contains("nothing changed"), "{o}");
    // The original experiment already has these very Q@Cs: nothing to do.
    let o = ok(ttp(&["lab", "import", fs[0], "--lab", url]));
    assert!(o.contains("nothing changed"), "{o}");
    let copy = dir.join("copy");
    ok(ttp(&[
        "lab",
        "export",
        "--lab",
        url,
        "--experiment",
        "scan-copy",
        "--out",
        copy.to_str().unwrap(),
    ]));
    assert_eq!(
        std::fs::read_to_string(copy.join("scan-copy.alpha.study")).unwrap(),
        std::fs::read_to_string(&files[0]).unwrap()
    );
    assert_eq!(
        c.psql("SELECT count(*) FROM ttp_lab_tasks")
            .parse::<u32>()
            .unwrap(),
        tasks_before.parse::<u32>().unwrap() + 2
    );
    // A study whose QEs differ from the lab's under the same name is
    // refused, and nothing is written.
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mut qc: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    qc["qes"][0]["time_meas_ms"] = serde_json::json!(123456.0);
    lines[1] = qc.to_string();
    let altered = dir.join("altered.study");
    std::fs::write(&altered, lines.join("\n") + "\n").unwrap();
    let before = c.psql("SELECT count(*) FROM ttp_lab_qes");
    assert_refused(
        &ttp(&["lab", "import", altered.to_str().unwrap(), "--lab", url]),
        "other measurements",
    );
    assert_eq!(c.psql("SELECT count(*) FROM ttp_lab_qes"), before);

    // A task not done (here one more, pending) is no Q@C of the analysis,
    // and the paragraph says so instead of reading the experiment as whole.
    c.psql("INSERT INTO ttp_lab_tasks (experiment, key, host_label, payload) VALUES ('scan', 'extra', 'alpha', '{}')");
    let o = ok(ttp(&["analyze", "--lab", url, "--experiment", "scan"]));
    assert!(
        o.contains(
            "1 of the 3 tasks of host label alpha are not done (0 failed, 1 pending, 0 running)"
        ),
        "{o}"
    );
}
