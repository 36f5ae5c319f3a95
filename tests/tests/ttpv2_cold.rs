//! `ttp-ebpf run --cold-cache` in the order of TTPv2's Fig. 5 and Sec. 3.1
//! (root): the plan, the preparation, the 64 MB O_DIRECT fill of the disk
//! caches, the page cache drop, then the QE, whose first read of its data
//! must reach the device.
use crate::common;

use common::*;

fn stamps(path: &std::path::Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().parse().expect("date +%s%N"))
        .collect()
}

/// The plan and preparation commands write the wall-clock time they ran;
/// the run JSON records when each QE's fill started, when the drop
/// returned, and when the QE started (all CLOCK_REALTIME). The preparation
/// reads the query's data file into the page cache, so a drop done before
/// it (the order this catches) leaves the QE nothing to read from the
/// device; done after, the QE's read (the ledger's read_bytes of the query)
/// covers the file. Also catches a skipped fill, a drop that did not
/// take effect (the re-read of the check file after the drop), and a
/// warm-up execution (`--warmup`, 1 by default) that skipped the steps
/// before it or was kept as a QE.
#[test]
fn cold_cache_order_is_plan_prepare_fill_drop_qe() {
    if !root_or_skip("cold_cache_order_is_plan_prepare_fill_drop_qe") {
        return;
    }
    let _serial = serial();
    // On disk (not a memory /tmp), where the page cache and O_DIRECT apply.
    let dir = std::path::PathBuf::from(format!("/var/tmp/ttp-test-cold-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data.bin");
    const DATA: u64 = 8 << 20;
    std::fs::write(&data, vec![7u8; DATA as usize]).unwrap();
    let (plan_log, prep_log) = (dir.join("plan.log"), dir.join("prepare.log"));
    let plan = format!(
        "date +%s%N >> {}; echo 'Seq Scan on data'",
        plan_log.display()
    );
    let prepare = format!(
        "cat {} > /dev/null; date +%s%N >> {}",
        data.display(),
        prep_log.display()
    );
    let json = dir.join("run.json");
    let (code, out, err) = ttp(&[
        "run",
        "-n",
        "3",
        "--cold-cache",
        "--as-root",
        "--plan-cmd",
        &plan,
        "--prepare",
        &prepare,
        "--json",
        json.to_str().unwrap(),
        "--",
        "cat",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "run failed: {err}");
    let v = json_file(&json);
    let qes = v["qes"].as_array().unwrap();
    assert_eq!(qes.len(), 3);
    let (plans, preps) = (stamps(&plan_log), stamps(&prep_log));
    // The default warm-up execution went through the same steps first
    // (its plan and preparation, then QE 1's), and is not a QE.
    assert_eq!((plans.len(), preps.len()), (4, 4), "{plans:?} {preps:?}");
    assert_eq!(v["setup"]["warmup"].as_array().map(Vec::len), Some(1));
    assert!(plans[0] < preps[0] && preps[0] < plans[1], "warm-up first");
    let (plans, preps) = (&plans[1..], &preps[1..]);
    for (i, qe) in qes.iter().enumerate() {
        let c = &qe["cold_cache"];
        let ctx = format!("qe {}: {c}", i + 1);
        let fill = c["fill_start_unix_ns"].as_u64().expect("fill done");
        let drop = c["drop_unix_ns"].as_u64().unwrap();
        let start = qe["start_unix_ns"].as_u64().unwrap();
        assert!(plans[i] < preps[i], "plan before prepare: {ctx}");
        assert!(preps[i] < fill, "prepare before fill: {ctx}");
        assert!(fill < drop, "fill before drop: {ctx}");
        assert!(drop < start, "drop before the QE: {ctx}");
        if i > 0 {
            let end = qes[i - 1]["end_unix_ns"].as_u64().unwrap();
            assert!(end < plans[i], "plan after the previous QE: {ctx}");
        }
        assert_eq!(c["fill_bytes"].as_u64(), Some(64 << 20), "{ctx}");
        assert!(c["fill_skipped"].is_null(), "{ctx}");
        let check = c["check_file_bytes"].as_u64().unwrap();
        assert!(check > 0, "{ctx}");
        assert!(c["check_device_bytes"].as_u64().unwrap() >= check, "{ctx}");
        // The QE's read of the file cached by --prepare went to the device.
        let read: u64 = qe["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["class"] == "query")
            .filter_map(|p| p["read_bytes"].as_u64())
            .sum();
        assert!(
            read >= DATA,
            "qe {}: the query read {read} bytes from the device",
            i + 1
        );
    }
    assert!(out.contains("with a cold cache"), "{out}");
    assert!(!out.contains("fill (Sec. 3.1"), "{out}");
    // The fill's files are removed with the run.
    assert!(!std::path::Path::new("/var/tmp/ttp-cold-cache-fill.dat").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
