//! Live contention blame (`ttp-ebpf blame --pid`) against contenders whose
//! answer is known, and the kernel's own counters (root; see
//! common::root_or_skip).
use crate::common;

use std::{
    io::{BufRead, BufReader, Write},
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::mpsc,
    time::Duration,
};

use common::*;
use serde_json::Value;
use ttp_ledger::probe::{AttachOptions, Ledger};

/// Outside blame mode the detail hooks in sched_switch are dead code the
/// verifier removes (DETAIL_ENABLED is a frozen read-only global), so the
/// plain ledger's sched_switch translates to fewer instructions than blame
/// mode's. Catches a gate the verifier cannot fold, which would make every
/// `attach` pay for blame on each context switch.
#[test]
fn detail_hooks_are_removed_outside_blame_mode() {
    if !root_or_skip("detail_hooks_are_removed_outside_blame_mode") {
        return;
    }
    let _serial = serial();
    // Blame loads the wake-up hook, which takes the sleep's end out of
    // sched_switch: the plain ledger is compared with the hook too.
    let plain = Ledger::attach_with(&AttachOptions {
        wake_latency: true,
        ..Default::default()
    })
    .expect("attach the ledger");
    let plain_bytes = plain
        .program_xlated_bytes("sched_switch")
        .expect("xlated size");
    drop(plain);
    let blame = Ledger::attach_blame().expect("attach the ledger with the blame detail");
    let blame_bytes = blame
        .program_xlated_bytes("sched_switch")
        .expect("xlated size");
    let avail = blame.detail_availability().expect("detail loaded");
    eprintln!("sched_switch: {plain_bytes} B plain, {blame_bytes} B in blame mode; {avail:?}");
    assert!(plain_bytes < blame_bytes, "{plain_bytes} vs {blame_bytes}");
    assert!(avail.disk_devices && avail.direct_reclaim, "{avail:?}");
}

/// A victim pid that does not exist is a usage error (exit 2) that names
/// the pid, before anything is loaded. 4194303 is above any pid_max.
#[test]
fn missing_victim_exits_2() {
    if !root_or_skip("missing_victim_exits_2") {
        return;
    }
    let _serial = serial();
    let out = Command::new(ttp_bin())
        .args(["blame", "--pid", "4194303", "--duration", "1s"])
        .output()
        .expect("run ttp-ebpf");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains("no process with pid 4194303"), "stderr: {err}");
}

/// Children killed (and reaped) when the test ends, pass or fail.
struct Kids(Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn contender(role: &str, args: &[&str]) -> Child {
    Command::new(fixture("fixture-blame"))
        .args(["--role", role, "--seconds", "40"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("start contender")
}

/// Creates a 16 MiB data file once; later runs reuse it (on the disk, as
/// O_DIRECT needs).
fn fill(path: &Path) {
    if std::fs::metadata(path).is_ok_and(|m| m.len() >= 16 << 20) {
        return;
    }
    let mut f = std::fs::File::create(path).expect("create data file");
    let chunk = vec![0x3cu8; 1 << 20];
    for _ in 0..16 {
        f.write_all(&chunk).expect("write data file");
    }
    f.sync_all().expect("sync data file");
}

fn ttp_pinned_to_cpu0() -> Command {
    let mut cmd = Command::new(ttp_bin());
    // SAFETY: only an async-signal-safe syscall between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
            Ok(())
        });
    }
    cmd
}

/// Runs ttp (already spawned) to its end; `ready` gets a message when it
/// printed its "Measuring" line.
fn finish_ttp(mut ttp: Child, ready: mpsc::Sender<()>) -> (Output, String) {
    let stderr = ttp.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("Measuring pid") {
                let _ = ready.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let out = ttp.wait_with_output().expect("wait for ttp-ebpf");
    (out, reader.join().expect("stderr reader"))
}

/// Task ids of process `pid`'s threads in a recording.
fn victim_ids(recording: &Value, pid: u32) -> Vec<u64> {
    recording["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["pid"] == pid)
        .map(|t| t["id"].as_u64().unwrap())
        .collect()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read json")).expect("parse json")
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The acceptance scenario, measured live. On cpu1: the victim, which
/// reads 64 KiB with O_DIRECT and computes 0.5 ms, again and again for 6 s,
/// and a burner that never sleeps. On cpu0: two readers, each reading once
/// every 5 ms, 256 KiB and 64 KiB (a 4:1 byte ratio in every window), and
/// ttp itself. Anywhere: a process that only sleeps. The machine's other
/// processes run too, and get their share.
///
/// Catches, in order: disk blame not proportional to bytes (4:1 ± 20 %);
/// CPU blame going to processes on another CPU, or not to the burner; an
/// idle process blamed (while the overlap baseline, by construction, blames
/// it); contributions that do not add up to the blocked time; CPU blocked
/// time off against the kernel's run_delay for the victim; per-device bytes
/// off against what the victim read; a victim exit not ending the
/// measurement; a recording that does not reproduce the live report.
#[test]
fn live_blame_finds_the_culprits() {
    if !root_or_skip("live_blame_finds_the_culprits") {
        return;
    }
    let _serial = serial();
    let t0 = std::time::Instant::now();
    let dir = std::env::temp_dir().join(format!("ttp-blame-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let data = |n: &str| -> PathBuf { dir.join(n) };
    // SAFETY: no arguments.
    let uid = unsafe { libc::getuid() };
    let file = |n: &str| {
        let p = std::env::temp_dir().join(format!("ttp-blame-fixture-{uid}-{n}.dat"));
        fill(&p);
        p.to_str().expect("utf-8 path").to_string()
    };
    let (a_file, b_file, v_file) = (file("a"), file("b"), file("victim"));
    let kids = Kids(vec![
        contender("idle", &[]),
        contender("burner", &["--cpu", "1"]),
        contender(
            "reader",
            &["--cpu", "0", "--chunk-kib", "256", "--file", &a_file],
        ),
        contender(
            "reader",
            &["--cpu", "0", "--chunk-kib", "64", "--file", &b_file],
        ),
    ]);
    let pids: Vec<u32> = kids.0.iter().map(Child::id).collect();
    let (idle, burner, reader_a, reader_b) = (pids[0], pids[1], pids[2], pids[3]);
    let mut victim = Held::start(
        "fixture-blame",
        &[
            "--role",
            "victim",
            "--cpu",
            "1",
            "--seconds",
            "6",
            "--cpu-us",
            "500",
            "--file",
            &v_file,
        ],
    );
    let vpid = victim.pid();
    let (rec, json, replay) = (data("rec.json"), data("live.json"), data("replay.json"));
    let ttp = ttp_pinned_to_cpu0()
        .args([
            "blame",
            "--pid",
            &vpid.to_string(),
            "--top",
            "5",
            "--record",
        ])
        .args([&rec, Path::new("--json"), &json])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ttp-ebpf blame");
    let (ready_tx, ready_rx) = mpsc::channel();
    let runner = std::thread::spawn(move || finish_ttp(ttp, ready_tx));
    ready_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("ttp-ebpf did not start measuring");
    eprintln!("ttp measuring after {:?}", t0.elapsed());
    let burner_before = schedstat(burner);
    let steal_before = proc_stat_steal();
    victim.go();
    let said: Value = serde_json::from_str(&victim.line()).expect("victim output");
    let burner_after = schedstat(burner);
    let steal = steal_between(steal_before, proc_stat_steal());
    victim.finish();
    eprintln!("victim done after {:?}", t0.elapsed());
    let (out, stderr) = runner.join().expect("ttp runner");
    eprintln!("ttp done after {:?}", t0.elapsed());
    drop(kids);
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}\n{stderr}\nvictim said {said}");
    assert!(out.status.success(), "ttp-ebpf blame failed: {stderr}");

    let r = read_json(&json);
    assert_eq!(r["schema"], "ttp.blame/1");
    assert_eq!(r["victim"]["pid"], vpid);
    // The victim exited by itself after 6 s of work: the measurement ended
    // with it, and the report covers it. Its exit time comes from its exit
    // record, sent at its final switch-out; on these VMs some switches never
    // reach the tracepoint (docs/ledger.md), and then the report leaves the
    // exit time out rather than guess it.
    let span = num(&r["span_ns"]);
    match r["victim"]["exited_after_ns"].as_f64() {
        Some(exited) => assert!(
            exited > 6e9 && exited <= span + 1e6,
            "exited {exited} span {span}"
        ),
        None => {
            eprintln!(
                "note: the victim's exit record did not arrive; its exit time is not reported"
            );
            assert!(
                span > 6e9,
                "the measurement covers the victim's 6 s of work: span {span}"
            );
        }
    }
    assert_eq!(r["sources"]["disk_io"], true);
    assert_eq!(r["sources"]["mem_stall"], true);
    assert_eq!(r["sources"]["mem_alloc"], false);

    let resource = |name: &str| -> &Value {
        r["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["resource"] == name)
            .unwrap()
    };
    let culprits = r["culprits"].as_array().unwrap();
    let blame = |pid: u32, res: &str| -> f64 {
        culprits
            .iter()
            .find(|c| c["pid"] == pid)
            .map_or(0.0, |c| c["by_resource"][res].as_f64().unwrap_or(0.0))
    };
    // iQCAR eq. 5 / 10: per resource, the causes' contributions (unknown
    // included) add up to the victim's blocked time.
    for res in ["cpu", "disk", "memory"] {
        let x = resource(res);
        let blocked = num(&x["blocked_ns"]);
        let by_kind: f64 = x["by_kind"].as_object().unwrap().values().map(num).sum();
        let by_culprit: f64 = culprits
            .iter()
            .map(|c| c["by_resource"][res].as_f64().unwrap_or(0.0))
            .sum();
        assert!(
            (by_kind - blocked).abs() <= 1e-6 * blocked + 1.0,
            "{res}: {by_kind} vs {blocked}"
        );
        assert!(
            (by_culprit - blocked).abs() <= 1e-6 * blocked + 1.0,
            "{res}: {by_culprit} vs {blocked}"
        );
    }

    // Disk: blame in proportion to bytes, 4:1 ± 20 % (eq. 8 with RATP_c =
    // δt / bytes_c), while the two readers are the disk's main users. Each
    // window then holds their reads in a 4:1 ratio. Beside another heavy
    // writer (stress-ng --hdd held 67 % of this blame in one run) their
    // reads queue behind its writes and complete in bursts: the windows in
    // which the victim waited longest are those whose bytes are not 4:1,
    // and only the order of the two is the tool's to get right.
    let (a, b) = (blame(reader_a, "disk"), blame(reader_b, "disk"));
    let disk_blocked = num(&resource("disk")["blocked_ns"]);
    let concurrent = num(&resource("disk")["by_kind"]["concurrent"]);
    assert!(a > 0.0 && b > 0.0, "disk blame a {a} b {b}");
    if a + b >= 0.75 * concurrent {
        assert!(
            (3.2..=4.8).contains(&(a / b)),
            "disk blame ratio {} (a {a}, b {b})",
            a / b
        );
    } else {
        eprintln!(
            "note: other processes held {:.0} % of the concurrent disk blame; the 4:1 ratio is not checked",
            100.0 * (1.0 - (a + b) / concurrent)
        );
        assert!(
            a > b,
            "disk blame a {a} not above b {b} (4 times its bytes)"
        );
    }
    // The victim's iowait lies within the time it spent in read calls.
    let read_ns = num(&said["read_ns"]);
    assert!(
        disk_blocked > 0.0 && disk_blocked <= read_ns * 1.02,
        "iowait {disk_blocked} read {read_ns}"
    );

    // CPU: the burner shares the victim's CPU; the readers and the idle
    // process never ran there. (Other processes of the machine may run on
    // cpu1 too and get their share, so the burner's blame is checked against
    // its consumption, not against a constant.)
    let cpu_blocked = num(&resource("cpu")["blocked_ns"]);
    assert!(blame(burner, "cpu") > 0.0, "the burner got no CPU blame");
    for pid in [reader_a, reader_b, idle] {
        assert_eq!(blame(pid, "cpu"), 0.0, "pid {pid} got CPU blame");
    }
    // The burner's CPU time in the recording is the kernel's (schedstat,
    // read by this test around the victim's work)...
    let recording = read_json(&rec);
    let on_cpu1 = |pid: u32| -> f64 {
        let ids: Vec<u64> = recording["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["pid"] == pid)
            .map(|t| t["id"].as_u64().unwrap())
            .collect();
        recording["windows"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|w| w["tasks"].as_array().unwrap())
            .filter(|t| ids.contains(&t["task"].as_u64().unwrap()))
            .map(|t| t["on_cpu_ns"]["1"].as_f64().unwrap_or(0.0))
            .sum()
    };
    let burner_cpu = on_cpu1(burner);
    let burner_kernel = (burner_after.0 - burner_before.0) as f64;
    // (The recording starts a little before the first read and ends a
    // little after the second; the ledger's on-CPU time is wall time, which
    // includes what the hypervisor stole, schedstat's is not.)
    assert!(
        within(burner_cpu, burner_kernel, 0.03 + 2.0 * steal, 100e6),
        "burner on cpu1 {burner_cpu} vs schedstat {burner_kernel} (steal share {steal:.4})"
    );
    // ...and its blame is, window by window, its share of what others
    // consumed on cpu1 while the victim waited there (eq. 10 with eq. 12's
    // capacity: what no thread and not the idle task used is the unknown
    // consumer). Computed here from the recording whose consumption was just
    // checked against schedstat: per window, not from whole-run shares,
    // which drift apart when other work on the machine comes in bursts.
    let victims = victim_ids(&recording, vpid);
    let burner_ids: Vec<u64> = recording["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["pid"] == burner)
        .map(|t| t["id"].as_u64().unwrap())
        .collect();
    let mut expected = 0.0;
    for w in recording["windows"].as_array().unwrap() {
        let len = num(&w["end_ns"]) - num(&w["start_ns"]);
        let (mut wait, mut mine, mut others, mut all) = (0.0, 0.0, 0.0, 0.0);
        for t in w["tasks"].as_array().unwrap() {
            let id = t["task"].as_u64().unwrap();
            let cpu1 = t["on_cpu_ns"]["1"].as_f64().unwrap_or(0.0);
            all += cpu1;
            if victims.contains(&id) {
                wait += t["runq_wait_ns"]["1"].as_f64().unwrap_or(0.0);
            } else {
                others += cpu1;
                if burner_ids.contains(&id) {
                    mine += cpu1;
                }
            }
        }
        let idle = w["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cpu"] == 1)
            .and_then(|c| c["idle_ns"].as_f64());
        let unknown = idle.map_or(0.0, |i| (len - all - i).max(0.0));
        if wait > 0.0 && others + unknown > 0.0 {
            expected += wait * mine / (others + unknown);
        }
    }
    assert!(
        within(blame(burner, "cpu"), expected, 0.05, 5e6),
        "burner CPU blame {} vs {expected} from its share of cpu1, window by window",
        blame(burner, "cpu")
    );
    // The victim's CPU blocked time is its run-queue wait: the kernel's
    // run_delay over its work, plus the short waits before and after it.
    let run_delay = num(&said["run_delay_ns"]);
    assert!(
        within(cpu_blocked, run_delay, 0.10, 30e6),
        "cpu blocked {cpu_blocked} vs run_delay {run_delay}"
    );

    // The idle process: no blame from ttp, a share from the overlap method.
    let idle_c = culprits
        .iter()
        .find(|c| c["pid"] == idle)
        .expect("idle process listed");
    assert_eq!(num(&idle_c["blame_ns"]), 0.0);
    assert!(num(&idle_c["overlap_blame_ns"]) > 0.0);

    // The victim's completed bytes are what it read with O_DIRECT.
    let ids = victim_ids(&recording, vpid);
    let bytes: f64 = recording["windows"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|w| w["tasks"].as_array().unwrap())
        .filter(|t| ids.contains(&t["task"].as_u64().unwrap()))
        .flat_map(|t| {
            t["disk_bytes"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(_, v)| num(v))
        })
        .sum();
    // Not to the byte: the victim's page faults on its own binary read from
    // the same disk (a little more), and a read of its that the block layer
    // merges into another process's request belongs to that request's
    // creator (a little less).
    let read = num(&said["bytes"]);
    assert!(
        within(bytes, read, 0.01, f64::from(4u32 << 20)),
        "victim bytes recorded {bytes} vs read {read}"
    );

    // Input checks (docs/blame.md): the CPU-capacity one may fail in a
    // window or two on a loaded machine (a switch between reading a thread's
    // counters and the CPU's idle state, or a switch the kernel did not
    // report); the others hold by construction or by measurement.
    let windows = num(&r["windows"]);
    for check in r["checks"].as_array().unwrap() {
        let allowed = if check["name"] == "cpu_time_within_window" {
            (windows * 0.03).ceil()
        } else {
            0.0
        };
        assert!(
            num(&check["violations"]) <= allowed,
            "check failed: {check}"
        );
    }

    // The recording reproduces the report.
    let out = Command::new(ttp_bin())
        .args(["blame", "--from"])
        .args([&rec, Path::new("--json"), &replay])
        .output()
        .expect("run ttp-ebpf blame --from");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        read_json(&replay),
        r,
        "replayed report differs from the live one"
    );
    std::fs::remove_dir_all(&dir).expect("remove temp dir");
}

/// ttp's disk extension live (docs/blame.md, "The victim's own disk
/// time"): a victim reading alone with O_DIRECT — no contender started by
/// the test. The split of its iowait must add up (own service + behind
/// others = the disk's blocked time, within the victim's own read time),
/// the own part must be there (the device served its requests while it
/// waited), and in the split view the only processes blamed are ones that
/// completed disk I/O themselves in the recording: on a machine where
/// nothing else touches the disk that is nobody (the "reading alone gets
/// no blame" case); a disk writer running beside the test is blamed only
/// for the time the victim waited behind it. Catches culprits blamed for
/// the victim's own service time, a split missing from the report, and a
/// split that does not add up.
#[test]
fn a_victim_reading_alone_is_blamed_on_nobody_for_its_own_disk_time() {
    if !root_or_skip("a_victim_reading_alone_is_blamed_on_nobody_for_its_own_disk_time") {
        return;
    }
    let _serial = serial();
    let dir = std::env::temp_dir().join(format!("ttp-blame-alone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // SAFETY: no arguments.
    let uid = unsafe { libc::getuid() };
    let v_file = std::env::temp_dir().join(format!("ttp-blame-fixture-{uid}-victim.dat"));
    fill(&v_file);
    let mut victim = Held::start(
        "fixture-blame",
        &[
            "--role",
            "victim",
            "--seconds",
            "3",
            "--cpu-us",
            "500",
            "--file",
            v_file.to_str().expect("utf-8 path"),
        ],
    );
    let vpid = victim.pid();
    let (rec, json) = (dir.join("rec.json"), dir.join("live.json"));
    let ttp = ttp_pinned_to_cpu0()
        .args(["blame", "--pid", &vpid.to_string(), "--record"])
        .args([&rec, Path::new("--json"), &json])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ttp-ebpf blame");
    let (ready_tx, ready_rx) = mpsc::channel();
    let runner = std::thread::spawn(move || finish_ttp(ttp, ready_tx));
    ready_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("ttp-ebpf did not start measuring");
    victim.go();
    let said: Value = serde_json::from_str(&victim.line()).expect("victim output");
    victim.finish();
    let (out, stderr) = runner.join().expect("ttp runner");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}\n{stderr}\nvictim said {said}");
    assert!(out.status.success(), "ttp-ebpf blame failed: {stderr}");
    let r = read_json(&json);
    // Who did disk I/O in the recording, besides the victim.
    let recording = read_json(&rec);
    let pid_of: std::collections::HashMap<u64, u64> = recording["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_u64().unwrap(), t["pid"].as_u64().unwrap()))
        .collect();
    let mut io_pids = std::collections::BTreeSet::new();
    for w in recording["windows"].as_array().unwrap() {
        for t in w["tasks"].as_array().unwrap() {
            let bytes: u64 = t["disk_bytes"]
                .as_object()
                .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
            if bytes > 0 {
                io_pids.insert(pid_of[&t["task"].as_u64().unwrap()]);
            }
        }
    }
    io_pids.remove(&u64::from(vpid));
    let (blocked, own, _) = check_disk_split(&r, &io_pids);
    let read_ns = num(&said["read_ns"]);
    assert!(
        blocked > 0.0 && blocked <= read_ns * 1.02 && own > 0.0,
        "blocked {blocked}, own {own}, the victim's read time {read_ns}"
    );
}
