//! A VM's free page reporting held while `run` measures, and put back
//! after a normal end and after a SIGKILL (sys/page_reporting.rs).
use crate::common;

use std::{
    path::Path,
    time::{Duration, Instant},
};

use common::{
    held::{check_after_kill, measured_program, sigkill},
    *,
};

const REPORTING_ORDER: &str = "/sys/module/page_reporting/parameters/page_reporting_order";

fn reporting_order() -> String {
    std::fs::read_to_string(REPORTING_ORDER)
        .expect("page_reporting_order")
        .trim()
        .to_string()
}

/// Puts a file's value back after the test.
struct RestoreFile(&'static str, String);

impl Drop for RestoreFile {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0, format!("{}\n", self.1));
    }
}

/// Whether a virtio-balloon device reports free pages (its feature bit 5,
/// VIRTIO_BALLOON_F_REPORTING), read apart from ttp's own reader.
fn balloon_reports() -> bool {
    std::fs::read_dir("/sys/bus/virtio/drivers/virtio_balloon").is_ok_and(|d| {
        d.flatten().any(|e| {
            std::fs::read_to_string(e.path().join("features"))
                .is_ok_and(|f| f.chars().nth(5) == Some('1'))
        })
    })
}

/// Whether a live ttp holds the order.
fn reporting_held_by_a_live_ttp() -> bool {
    held::held_by_a_live_ttp(&["/run/ttp/page_reporting_order.lock"])
}

/// Catches a `run` that lets the VM hand freed memory back to its host
/// while it measures (QEs then carry the refaults as system time,
/// sys/page_reporting.rs), one that leaves the order changed after a
/// normal end, and a SIGKILL that leaves it changed for good: while `run`
/// measures, the order is above the machine's and recorded first; after
/// it ends, and after `check` follows a kill, it is the machine's again.
#[test]
fn run_holds_free_page_reporting_and_restores_it() {
    if !root_or_skip("run_holds_free_page_reporting_and_restores_it") {
        return;
    }
    if !(Path::new(REPORTING_ORDER).exists() && balloon_reports()) {
        eprintln!("skipped: no virtio-balloon device reports free pages on this machine");
        return;
    }
    let _serial = serial();
    // The machine's own value: not one another test's `run` holds now.
    let t0 = Instant::now();
    while reporting_held_by_a_live_ttp() {
        if t0.elapsed() > Duration::from_secs(120) {
            eprintln!("skipped: another ttp held page_reporting_order for 120 s");
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let start = reporting_order();
    let start_n: u32 = start.parse().expect("an order");
    // Where it is already at its largest (10 on x86-64, set by hand), the
    // test starts from 9, put back after.
    let _restore_order = (start_n >= 10).then(|| {
        std::fs::write(REPORTING_ORDER, "9\n").expect("set order 9");
        RestoreFile(REPORTING_ORDER, start.clone())
    });
    let (start, start_n) = if start_n >= 10 {
        ("9".to_string(), 9)
    } else {
        (start, start_n)
    };
    eprintln!("page_reporting_order at the start {start}");

    // A normal end: held while measuring, said among the deviations,
    // restored after.
    let json = temp_path("page-reporting-run.json");
    let seen = temp_path("page-reporting-seen");
    let (code, _, err) = ttp(&[
        "run",
        "-n",
        "1",
        "--warmup",
        "0",
        "--json",
        json.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &format!("cat {REPORTING_ORDER} > {}", seen.display()),
    ]);
    assert_eq!(code, 0, "{err}");
    let report = json_file(&json);
    let _ = std::fs::remove_file(&json);
    // What the measured command itself read while the QE ran.
    let inside: u32 = std::fs::read_to_string(&seen)
        .expect("the command's reading")
        .trim()
        .parse()
        .expect("an order");
    let _ = std::fs::remove_file(&seen);
    assert!(
        inside > start_n,
        "order {inside} inside the QE, {start} before"
    );
    let deviations = report["machine"]["deviations"].to_string();
    assert!(
        deviations.contains("free page reporting"),
        "not stated: {deviations}"
    );
    if !reporting_held_by_a_live_ttp() {
        assert_eq!(reporting_order(), start, "not restored after a normal end");
    }

    // A SIGKILL while measuring: the next command puts it back.
    let mut run = std::process::Command::new(ttp_bin())
        .args(["run", "-n", "1", "--warmup", "0", "--", "sleep", "30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start ttp run");
    let pid = run.id();
    // The measured program runs once the session holds the order.
    let sleepers = measured_program(pid, "sleep");
    let held: u32 = reporting_order().parse().unwrap();
    assert!(
        held > start_n,
        "order {held} while measuring, {start} before"
    );
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("/run/ttp/page_reporting_order.json").unwrap_or_default(),
    )
    .unwrap_or_default();
    if record["pid"] == pid {
        assert_eq!(record["original"], start.as_str(), "{record}");
        assert_eq!(record["set_to"], held.to_string().as_str(), "{record}");
    }
    sigkill(&mut run);
    for p in sleepers {
        // SAFETY: the orphaned program of this test.
        unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
    }
    let (report, out) = check_after_kill("page-reporting-check.json");
    if !reporting_held_by_a_live_ttp() {
        assert_eq!(reporting_order(), start, "not restored after the kill");
        let l = report["leftovers"]
            .as_array()
            .expect("leftovers")
            .iter()
            .find(|l| l["setting"] == "page_reporting.page_reporting_order")
            .cloned()
            .unwrap_or_else(|| panic!("no leftover reported: {out}"));
        assert_eq!(l["outcome"], "restored", "{l}");
        assert_eq!(l["left_by_pid"], pid, "{l}");
        assert!(
            out.contains(&format!(
                "restored page_reporting.page_reporting_order = {start}"
            )),
            "not said in words: {out}"
        );
    }
}
