//! Nothing left behind whatever kills ttp, and result files that belong to
//! the user who asked for them (root).
use crate::common;

use std::{
    os::unix::fs::MetadataExt,
    path::Path,
    time::{Duration, Instant},
};

use common::{
    held::{check_after_kill, measured_program, sigkill, wait_for},
    *,
};

const DELAYACCT: &str = "/proc/sys/kernel/task_delayacct";
const STATE: &str = "/run/ttp/delayacct.json";

fn delayacct() -> String {
    std::fs::read_to_string(DELAYACCT)
        .expect("task_delayacct")
        .trim()
        .to_string()
}

/// Whether some ttp instance holds delay accounting: the lock of this
/// build and the lock file of earlier builds.
fn held_by_a_live_ttp() -> bool {
    held::held_by_a_live_ttp(&["/run/ttp/delayacct.lock", "/run/ttp-delayacct.lock"])
}

/// Puts task_delayacct back to what it was before the test, whatever the
/// test did with it.
struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::write(DELAYACCT, format!("{}\n", self.0));
    }
}

/// The ids of the BPF programs a process holds, from its descriptors'
/// fdinfo (programs and the links that hold them).
fn prog_ids_of(pid: u32) -> Vec<u32> {
    let mut ids = Vec::new();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return ids;
    };
    for fd in fds.flatten() {
        let Ok(info) = std::fs::read_to_string(fd.path()) else {
            continue;
        };
        for line in info.lines() {
            if let Some(v) = line.strip_prefix("prog_id:") {
                ids.extend(v.trim().parse::<u32>().ok());
            }
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Whether the kernel still has the BPF program with this id
/// (BPF_PROG_GET_FD_BY_ID: ENOENT once it is freed).
fn prog_loaded(id: u32) -> bool {
    #[repr(C)]
    struct Attr {
        prog_id: u32,
        next_id: u32,
        open_flags: u32,
    }
    let attr = Attr {
        prog_id: id,
        next_id: 0,
        open_flags: 0,
    };
    const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
    // SAFETY: the attribute is a valid, fully initialised prefix of bpf_attr
    // of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_GET_FD_BY_ID,
            &attr as *const Attr,
            std::mem::size_of::<Attr>() as libc::c_uint,
        )
    };
    if fd >= 0 {
        // SAFETY: a descriptor we just received.
        unsafe { libc::close(fd as libc::c_int) };
        return true;
    }
    std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOENT)
}

/// Switches delay accounting off for the test when it is on with no ttp
/// holding it (switched on by hand, or left on by an earlier build): the
/// restoring path is only exercised from "off". The guard puts the
/// machine's value back after.
fn delayacct_off_for_the_test() -> (Restore, String) {
    let before = delayacct();
    let restore = Restore(before.clone());
    if before != "0" && !held_by_a_live_ttp() {
        std::fs::write(DELAYACCT, "0\n").expect("switch delay accounting off");
    }
    let start_value = delayacct();
    eprintln!("task_delayacct before the test {before}, at the start {start_value}");
    (restore, start_value)
}

/// While ttp (`pid`) measures: delay accounting on and its previous value
/// recorded; returns the BPF programs it holds.
fn while_measuring(pid: u32, start_value: &str) -> Vec<u32> {
    assert_eq!(delayacct(), "1", "ttp switches delay accounting on");
    if start_value == "0" {
        let state: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(STATE).unwrap_or_default())
                .unwrap_or_default();
        assert_eq!(
            state["original"], "0",
            "state recorded before the change: {state}"
        );
        assert_eq!(state["set_to"], "1");
        assert_eq!(state["pid"], pid);
    }
    let progs = prog_ids_of(pid);
    assert!(!progs.is_empty(), "ttp holds no BPF program");
    progs
}

/// After ttp `pid` was killed: `check` finds the record, puts the value
/// back and says so in words and in its JSON; the programs are unloaded.
fn after_the_kill(pid: u32, start_value: &str, progs: &[u32]) {
    let (report, out) = check_after_kill("leftovers-check.json");
    let leftovers = report["leftovers"].as_array().expect("leftovers in --json");
    if start_value == "0" && !held_by_a_live_ttp() {
        eprintln!("check reported: {leftovers:?}");
        // `run` also holds a VM's free page reporting (its own test below).
        let ours: Vec<_> = leftovers
            .iter()
            .filter(|l| l["setting"] == "kernel.task_delayacct")
            .collect();
        assert_eq!(ours.len(), 1, "{leftovers:?}");
        let l = ours[0];
        assert_eq!(l["setting"], "kernel.task_delayacct");
        assert_eq!(l["outcome"], "restored", "{l}");
        assert_eq!(l["original"], "0");
        assert_eq!(l["left_by_pid"], pid);
        assert!(
            out.contains("restored kernel.task_delayacct = 0"),
            "not said in words: {out}"
        );
        assert!(
            !Path::new(STATE).exists(),
            "state file kept after restoring"
        );
    }
    if !held_by_a_live_ttp() {
        assert_eq!(delayacct(), start_value, "task_delayacct not restored");
    }
    wait_for(
        "the killed ttp's programs unloaded",
        Duration::from_secs(10),
        || progs.iter().all(|&id| !prog_loaded(id)),
    );
}

/// Catches the leftover of issue 17: `kill -9` of `attach` left
/// kernel.task_delayacct = 1 for good. After the kill, `check` must find
/// the record, put the value from before back, and say so in its JSON; the
/// killed instance's programs must be gone (the kernel frees them with the
/// last descriptor: a program pinned or held elsewhere would stay).
#[test]
fn sigkill_of_attach_leaves_nothing_behind() {
    if !root_or_skip("sigkill_of_attach_leaves_nothing_behind") {
        return;
    }
    let _serial = serial();
    let (_restore, start_value) = delayacct_off_for_the_test();
    let mut attach = ttp_attached(&["attach", "--all", "--duration", "60s", "-q"]);
    let pid = attach.id();
    let progs = while_measuring(pid, &start_value);
    sigkill(&mut attach);
    after_the_kill(pid, &start_value, &progs);
}

/// SIGKILL at spread-out points of `attach`'s start (before, while and
/// after it records, switches delay accounting on and loads its programs):
/// whatever point the kill hits, the next command leaves task_delayacct as
/// it was, no state file, and none of the programs seen loaded. Catches a
/// window where the change is made but not yet recorded.
#[test]
fn sigkill_at_any_point_of_attach_start() {
    if !root_or_skip("sigkill_at_any_point_of_attach_start") {
        return;
    }
    let _serial = serial();
    let (_restore, start_value) = delayacct_off_for_the_test();
    // How long attach takes to start on this machine now: the kills are
    // spread from 0 to 1.25 times that.
    let t0 = Instant::now();
    let mut first = ttp_attached(&["attach", "--all", "--duration", "60s", "-q"]);
    let start_ms = t0.elapsed().as_millis() as u64;
    sigkill(&mut first);
    let (code, _, err) = ttp(&["check", "--sample", "10ms"]);
    assert!(
        code == 0 || code == 1,
        "check failed to run ({code}): {err}"
    );
    let (mut killed_on, mut killed_loaded) = (0, 0);
    for i in 0..10u64 {
        let delay_ms = start_ms * i / 8;
        let mut attach = std::process::Command::new(ttp_bin())
            .args(["attach", "--all", "--duration", "60s", "-q"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start ttp attach");
        std::thread::sleep(Duration::from_millis(delay_ms));
        let progs = prog_ids_of(attach.id());
        let on = delayacct() == "1";
        // SAFETY: kill of our own child.
        unsafe { libc::kill(attach.id() as libc::pid_t, libc::SIGKILL) };
        killed_on += usize::from(on);
        killed_loaded += usize::from(!progs.is_empty());
        attach.wait().expect("wait ttp");
        let json = temp_path("leftovers-any-point.json");
        let (code, _, err) = ttp(&[
            "check",
            "--sample",
            "10ms",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(
            code == 0 || code == 1,
            "check failed to run ({code}): {err}"
        );
        let _ = std::fs::remove_file(&json);
        if !held_by_a_live_ttp() {
            assert_eq!(
                delayacct(),
                start_value,
                "killed after {delay_ms} ms: task_delayacct not restored"
            );
            assert!(!Path::new(STATE).exists(), "state file left");
        }
        wait_for("the programs unloaded", Duration::from_secs(10), || {
            progs.iter().all(|&id| !prog_loaded(id))
        });
    }
    eprintln!(
        "attach started in {start_ms} ms; of 10 kills, {killed_on} after delay accounting was on, {killed_loaded} with programs loaded"
    );
    if start_value == "0" {
        assert!(
            killed_on > 0 && killed_loaded > 0,
            "no kill landed after the change ({killed_on}) or the load ({killed_loaded}): the delays miss attach's start"
        );
    }
}

/// The same for `run` killed while its program runs: the measured program
/// is not left stopped (it goes on as an orphan, as under `time` or `perf
/// stat`; a child still held before exec exits instead, sys/spawn.rs), and
/// the session's change is restored by the next command.
#[test]
fn sigkill_of_run_leaves_nothing_behind() {
    if !root_or_skip("sigkill_of_run_leaves_nothing_behind") {
        return;
    }
    let _serial = serial();
    let (_restore, start_value) = delayacct_off_for_the_test();
    let mut run = std::process::Command::new(ttp_bin())
        .args(["run", "-n", "1", "--", "sleep", "30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start ttp run");
    let pid = run.id();
    let program = measured_program(pid, "sleep");
    let progs = while_measuring(pid, &start_value);
    sigkill(&mut run);
    for p in &program {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        let state = stat[stat.rfind(')').unwrap_or(0) + 2..].chars().next();
        assert_ne!(state, Some('T'), "measured program {p} left stopped");
        // SAFETY: the orphaned program of this test.
        unsafe { libc::kill(*p as libc::pid_t, libc::SIGKILL) };
    }
    after_the_kill(pid, &start_value, &progs);
}

/// Catches result files left owned by root in the user's directory under
/// sudo: `check --json` and `analyze --json --svg` run as root with
/// SUDO_UID/SUDO_GID of nobody, and no temporary file left.
#[test]
fn files_belong_to_the_sudo_user() {
    if !root_or_skip("files_belong_to_the_sudo_user") {
        return;
    }
    let _serial = serial();
    let dir = temp_path("owned");
    std::fs::create_dir_all(&dir).unwrap();
    let check = dir.join("check.json");
    let analyze = dir.join("analyze.json");
    let svg = dir.join("analyze.svg");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ttp-user/src/report/render/fixtures/run-1.json");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(ttp_bin())
            .args(args)
            .env("SUDO_UID", "65534")
            .env("SUDO_GID", "65534")
            .output()
            .expect("run ttp-ebpf");
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "check",
        "--sample",
        "100ms",
        "--json",
        check.to_str().unwrap(),
    ]);
    run(&[
        "analyze",
        fixture.to_str().unwrap(),
        "--json",
        analyze.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    for f in [&check, &analyze, &svg] {
        let m = std::fs::metadata(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!((m.uid(), m.gid()), (65534, 65534), "{}", f.display());
    }
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "temporary files left: {names:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Compiles the vprofile fixture (tests/fixtures/vprof-target) the way its
/// header says.
fn vprof_target() -> std::path::PathBuf {
    let out = temp_path("vprof-target");
    build_vprof_target(&out);
    out
}

/// Where `symbol` of `bin` is in process `pid`'s memory: the symbol's
/// address (nm) plus, for a position-independent binary, its load base
/// (the mapping at file offset 0, /proc/PID/maps).
fn runtime_address(pid: u32, bin: &Path, symbol: &str) -> u64 {
    let nm = std::process::Command::new("nm")
        .arg(bin)
        .output()
        .expect("nm");
    let nm = String::from_utf8_lossy(&nm.stdout);
    let vaddr = nm
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[2] == symbol).then(|| u64::from_str_radix(f[0], 16).unwrap())
        })
        .unwrap_or_else(|| panic!("{symbol} not in {}", bin.display()));
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    let name = bin.to_str().unwrap();
    let base = maps
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 6 && f[5] == name && f[2] == "00000000")
                .then(|| u64::from_str_radix(f[0].split('-').next().unwrap(), 16).unwrap())
        })
        .expect("the binary's first mapping");
    // A position-dependent binary is linked at its run-time address.
    if vaddr >= base { vaddr } else { base + vaddr }
}

/// The byte at `addr` in process `pid` (a uprobe's breakpoint is 0xCC).
fn byte_at(pid: u32, addr: u64) -> u8 {
    use std::os::unix::fs::FileExt;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).expect("mem");
    let mut b = [0u8];
    mem.read_exact_at(&mut b, addr).expect("read mem");
    b[0]
}

/// Catches uprobes that outlive a killed `vprofile`: the breakpoint the
/// kernel writes at the probed function's entry must be gone (the original
/// byte back) once ttp is killed with SIGKILL, its programs freed, and the
/// measured process neither stopped nor killed.
#[test]
fn sigkill_of_vprofile_removes_its_uprobes() {
    if !root_or_skip("sigkill_of_vprofile_removes_its_uprobes") {
        return;
    }
    let _serial = serial();
    let bin = vprof_target();
    let _remove = RemoveOnDrop(bin.clone());
    let target = Background(
        std::process::Command::new(&bin)
            .args(["flat", "0", "-"])
            .spawn()
            .expect("start vprof-target"),
    );
    let pid = target.0.id();
    std::thread::sleep(Duration::from_millis(50));
    let entry = runtime_address(pid, &bin, "vt_root");
    let original = byte_at(pid, entry);
    assert_ne!(original, 0xcc, "vt_root starts with a breakpoint already");
    let mut ttp = std::process::Command::new(ttp_bin())
        .args(["vprofile", "--pid", &pid.to_string(), "--binary"])
        .arg(&bin)
        .args([
            "--root",
            "vt_root",
            "--rounds",
            "1",
            "--invocations",
            "1000000",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start ttp vprofile");
    wait_for("the uprobe at vt_root", Duration::from_secs(30), || {
        byte_at(pid, entry) == 0xcc
    });
    let progs = prog_ids_of(ttp.id());
    assert!(!progs.is_empty(), "vprofile holds no BPF program");
    sigkill(&mut ttp);
    wait_for("the breakpoint removed", Duration::from_secs(10), || {
        byte_at(pid, entry) == original
    });
    wait_for("the programs unloaded", Duration::from_secs(10), || {
        progs.iter().all(|&id| !prog_loaded(id))
    });
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("target still runs");
    let state = stat[stat.rfind(')').unwrap() + 2..].chars().next();
    assert!(
        matches!(state, Some('R' | 'S')),
        "target left in state {state:?}"
    );
}

/// Removes a file the test made, also when it fails.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Catches `blame` leaving its programs (the ledger and the blame detail)
/// loaded, or its victim stopped, after SIGKILL.
#[test]
fn sigkill_of_blame_leaves_nothing_behind() {
    if !root_or_skip("sigkill_of_blame_leaves_nothing_behind") {
        return;
    }
    let _serial = serial();
    let victim = Background(
        std::process::Command::new("sleep")
            .arg("120")
            .spawn()
            .expect("start sleep"),
    );
    let pid = victim.0.id();
    let mut blame = std::process::Command::new(ttp_bin())
        .args(["blame", "--pid", &pid.to_string(), "--duration", "60s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start ttp blame");
    let mut progs = Vec::new();
    // The ledger and the detail load one after the other: wait until the
    // count stops growing for half a second.
    let mut stable_since = Instant::now();
    wait_for("blame's programs loaded", Duration::from_secs(60), || {
        let now = prog_ids_of(blame.id());
        if now.len() != progs.len() {
            progs = now;
            stable_since = Instant::now();
        }
        !progs.is_empty() && stable_since.elapsed() > Duration::from_millis(500)
    });
    sigkill(&mut blame);
    wait_for("the programs unloaded", Duration::from_secs(10), || {
        progs.iter().all(|&id| !prog_loaded(id))
    });
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("victim runs");
    let state = stat[stat.rfind(')').unwrap() + 2..].chars().next();
    assert_eq!(state, Some('S'), "victim left in state {state:?}");
}
