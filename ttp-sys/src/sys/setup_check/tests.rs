//! The checks on fixture trees: each item must read the right file and
//! judge it as the protocol step says.
use std::{
    cell::RefCell,
    fs,
    io::Write,
    path::{Path, PathBuf},
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use super::*;

struct Fixture(PathBuf);

impl Fixture {
    fn new(name: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ttp-check-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn put(&self, rel: &str, text: &str) -> &Self {
        let p = self.0.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
        self
    }

    fn put_gz(&self, rel: &str, text: &str) -> &Self {
        let p = self.0.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        let mut e = flate2::write::GzEncoder::new(
            fs::File::create(p).unwrap(),
            flate2::Compression::fast(),
        );
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap();
        self
    }

    fn proc(&self, pid: u32, comm: &str, ticks: u64) -> &Self {
        self.put(
            &format!("proc/{pid}/stat"),
            &format!(
                "{pid} ({comm}) S 1 {pid} {pid} 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 500 0 0\n"
            ),
        )
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

struct Fake {
    root: PathBuf,
    clock: Option<ClockState>,
    virt: Option<String>,
    /// Files rewritten during the sampling pause (what changes in 1 s).
    during_pause: RefCell<Vec<(String, String)>>,
    bpf_stats: Result<(), String>,
}

impl Fake {
    fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            clock: Some(ClockState {
                state: 0,
                status: 0x2001, // STA_PLL | STA_NANO, synchronised
                maxerror_us: 16_000,
                esterror_us: 100,
            }),
            virt: Some("none".into()),
            during_pause: RefCell::new(vec![]),
            bpf_stats: Ok(()),
        }
    }
}

impl Probes for Fake {
    fn adjtimex(&self) -> Option<ClockState> {
        self.clock
    }
    fn taskstats_family(&self) -> Result<u16, String> {
        Ok(0x17)
    }
    fn detect_virt(&self) -> Option<String> {
        self.virt.clone()
    }
    fn user_hz(&self) -> Option<u64> {
        Some(100)
    }
    fn pause(&self, d: Duration) -> Duration {
        for (rel, text) in self.during_pause.borrow_mut().drain(..) {
            fs::write(self.root.join(rel), text).unwrap();
        }
        d
    }
    fn own_pid(&self) -> u32 {
        999
    }
    fn bpf_stats(&self) -> Result<(), String> {
        self.bpf_stats.clone()
    }
}

const STAT: &str = "cpu  1000 0 500 8000 100 0 20 0 0 0\n";

/// A tuned bare-metal machine: one CPU, no SMT, performance governor with a
/// pinned frequency, turbo off, NTP running, nothing else busy.
fn tuned() -> Fixture {
    let f = Fixture::new("tuned");
    f.put("proc/sys/kernel/osrelease", "6.8.0-45-generic\n")
        .put("sys/kernel/btf/vmlinux", "")
        .put("proc/mounts", "proc /proc proc rw 0 0\nnodev /sys/kernel/tracing tracefs rw 0 0\n")
        .put("proc/sys/kernel/task_delayacct", "1\n")
        .put("proc/sys/kernel/bpf_stats_enabled", "0\n")
        .put_gz("proc/config.gz", "CONFIG_HZ=1000\nCONFIG_TASKSTATS=y\n# CONFIG_X is not set\nCONFIG_TICK_CPU_ACCOUNTING=y\n")
        .put("sys/devices/system/cpu/online", "0\n")
        .put("sys/devices/system/cpu/smt/control", "off\n")
        .put("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "performance\n")
        .put("sys/devices/system/cpu/cpu0/cpufreq/scaling_min_freq", "2900000\n")
        .put("sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq", "2900000\n")
        .put("sys/devices/system/cpu/intel_pstate/no_turbo", "1\n")
        .put("sys/class/dmi/id/sys_vendor", "Dell Inc.\n")
        .put("proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu vme sse2\n")
        .put("proc/stat", STAT)
        .proc(1, "systemd", 50)
        .proc(412, "chronyd", 3);
    f
}

fn item<'a>(r: &'a CheckReport, id: &str) -> &'a CheckItem {
    r.items
        .iter()
        .find(|i| i.id == id)
        .unwrap_or_else(|| panic!("no item {id}"))
}

/// Every item passes on a tuned machine. Catches a reader looking at the
/// wrong path (it would warn or fail) and a judgement that cannot pass.
#[test]
fn tuned_machine_passes_every_item() {
    let f = tuned();
    let r = run_checks(f.0.clone(), &Fake::new(&f.0), Duration::from_secs(1));
    let not_pass: Vec<_> = r
        .items
        .iter()
        .filter(|i| i.status != Status::Pass)
        .collect();
    assert!(not_pass.is_empty(), "{not_pass:#?}");
    assert_eq!(r.items.len(), 17);
    assert!(
        item(&r, "bpf_stats")
            .detail
            .contains("kernel.bpf_stats_enabled = 0")
    );
    assert!(
        item(&r, "hz")
            .detail
            .contains("CONFIG_HZ = 1000 (tick 1 ms)")
    );
    assert!(item(&r, "hz").detail.contains("USER_HZ = 100"));
    assert!(item(&r, "clock_sync").detail.contains("chronyd [412]"));
}

/// A VM without cpufreq (this project's CI machine): cpufreq, turbo and
/// virtualisation warn with remedies, steal since boot warns, nothing
/// fails or panics. Catches a missing sysfs directory treated as an error.
#[test]
fn vm_without_cpufreq_warns_with_remedies() {
    let f = Fixture::new("vm");
    f.put("proc/sys/kernel/osrelease", "6.18.44-fc-v769\n")
        .put("sys/kernel/btf/vmlinux", "")
        .put("proc/mounts", "proc /proc proc rw 0 0\n")
        .put("proc/sys/kernel/task_delayacct", "0\n")
        .put("sys/devices/system/cpu/online", "0-1\n")
        .put("sys/devices/system/cpu/smt/control", "notsupported\n")
        .put(
            "proc/cpuinfo",
            "processor\t: 0\nflags\t\t: fpu sse2 hypervisor\n",
        )
        .put("proc/stat", "cpu  16528 0 4153 86488 701 0 116 67 0 0\n")
        .proc(1, "process_api", 10);
    let mut probes = Fake::new(&f.0);
    probes.virt = Some("kvm".into());
    let r = run_checks(f.0.clone(), &probes, Duration::from_secs(1));
    for id in [
        "cpufreq",
        "turbo",
        "virtualization",
        "steal_time",
        "cpus",
        "tracefs",
        "delay_accounting",
        "hz",
    ] {
        let i = item(&r, id);
        assert_eq!(i.status, Status::Warn, "{id}: {i:?}");
        assert!(i.remedy.is_some(), "{id} has no remedy");
    }
    assert!(item(&r, "cpufreq").detail.contains("no cpufreq interface"));
    assert!(item(&r, "virtualization").detail.contains("hypervisor"));
    assert!(item(&r, "virtualization").detail.contains("kvm"));
    // 67 of 16528+4153+86488+701+116+67 = 108053 ticks.
    assert!(
        item(&r, "steal_time").detail.contains("0.062 % since boot"),
        "{}",
        item(&r, "steal_time").detail
    );
    assert_eq!(item(&r, "smt").status, Status::Pass);
    assert_eq!(r.count(Status::Fail), 0);
    assert_eq!(item(&r, "tracefs").fix, Some(Fix::MountTracefs));
    assert_eq!(
        item(&r, "delay_accounting").fix,
        Some(Fix::EnableDelayAccounting)
    );
}

/// Steal and per-process CPU over the window: +10 steal of +200 ticks is
/// 5 %; +50 ticks of one process in 1 s at USER_HZ 100 is 50 %; our own
/// process (pid 999) is left out. Catches deltas taken since boot, a wrong
/// USER_HZ scaling, or ttp flagging itself.
#[test]
fn window_deltas_give_steal_and_busy_processes() {
    let f = tuned();
    f.proc(77, "stress-ng", 1_000).proc(999, "ttp-ebpf", 0);
    let probes = Fake::new(&f.0);
    probes.during_pause.borrow_mut().extend([
        (
            "proc/stat".into(),
            "cpu  1100 0 550 8040 100 0 20 10 0 0\n".into(),
        ),
        (
            "proc/77/stat".into(),
            "77 (stress-ng) R 1 77 77 0 -1 0 0 0 0 0 1040 10 0 0 20 0 1 0 500 0 0\n".into(),
        ),
        (
            "proc/999/stat".into(),
            "999 (ttp-ebpf) R 1 999 999 0 -1 0 0 0 0 0 90 0 0 0 20 0 1 0 500 0 0\n".into(),
        ),
    ]);
    let r = run_checks(f.0.clone(), &probes, Duration::from_secs(1));
    let steal = item(&r, "steal_time");
    assert_eq!(steal.status, Status::Warn);
    assert!(
        steal.detail.starts_with("5.00 % of CPU time stolen"),
        "{}",
        steal.detail
    );
    let busy = item(&r, "busy_processes");
    assert_eq!(busy.status, Status::Warn);
    assert!(
        busy.detail.contains("stress-ng [77] 50 %"),
        "{}",
        busy.detail
    );
    assert!(!busy.detail.contains("ttp-ebpf"));
}

/// Catches the papers' daemons going unnoticed, and a remedy naming the
/// process instead of the unit to stop.
#[test]
fn finds_the_papers_non_critical_daemons() {
    let f = tuned();
    f.proc(300, "crond", 1)
        .proc(301, "cupsd", 1)
        .proc(302, "master", 1);
    let r = run_checks(f.0.clone(), &Fake::new(&f.0), Duration::from_secs(1));
    let d = item(&r, "noncritical_daemons");
    assert_eq!(d.status, Status::Warn);
    assert!(
        d.detail.contains("crond [300]") && d.detail.contains("cupsd [301]"),
        "{}",
        d.detail
    );
    assert!(
        d.remedy
            .as_deref()
            .unwrap()
            .contains("systemctl stop crond cups postfix")
    );
}

/// Catches an outdated kernel, missing BTF, missing taskstats or an
/// unsynchronised clock being passed.
#[test]
fn hard_failures_and_clock_warning() {
    let f = tuned();
    f.put("proc/sys/kernel/osrelease", "2.6.32-358.el6.x86_64\n");
    fs::remove_file(f.0.join("sys/kernel/btf/vmlinux")).unwrap();
    let mut probes = Fake::new(&f.0);
    probes.clock = Some(ClockState {
        state: 5,
        status: 0x0040,
        maxerror_us: 16_000_000,
        esterror_us: 16_000_000,
    });
    probes.bpf_stats = Err("Operation not permitted (os error 1)".into());
    let r = run_checks(f.0.clone(), &probes, Duration::from_secs(1));
    let b = item(&r, "bpf_stats");
    assert_eq!(b.status, Status::Warn, "measuring works without it");
    assert!(b.detail.contains("Operation not permitted"), "{b:?}");
    assert!(b.remedy.is_some());
    assert_eq!(item(&r, "kernel").status, Status::Fail);
    assert_eq!(item(&r, "btf").status, Status::Fail);
    let c = item(&r, "clock_sync");
    assert_eq!(c.status, Status::Warn);
    assert!(c.detail.contains("not synchronised"));
}

/// `--fix` writes exactly what the items offered: delay accounting on, the
/// governor to performance, turbo off; untouched files stay as they were.
/// Catches a fix written to the wrong path or applied without being offered.
#[test]
fn fixes_change_only_what_they_say() {
    let f = tuned();
    f.put("proc/sys/kernel/task_delayacct", "0\n")
        .put(
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "powersave\n",
        )
        .put("sys/devices/system/cpu/intel_pstate/no_turbo", "0\n");
    let probes = Fake::new(&f.0);
    let r = run_checks(f.0.clone(), &probes, Duration::from_secs(1));
    let outcomes = fix::apply(&f.0, &r.items);
    assert_eq!(outcomes.len(), 3, "{outcomes:?}");
    assert!(outcomes.iter().all(|o| o.error.is_none()), "{outcomes:?}");
    let read = |rel: &str| fs::read_to_string(f.0.join(rel)).unwrap();
    assert_eq!(read("proc/sys/kernel/task_delayacct"), "1");
    assert_eq!(
        read("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "performance"
    );
    assert_eq!(read("sys/devices/system/cpu/intel_pstate/no_turbo"), "1");
    assert_eq!(read("sys/devices/system/cpu/smt/control"), "off\n");
    let again = run_checks(f.0.clone(), &probes, Duration::from_secs(1));
    assert_eq!(again.count(Status::Warn) + again.count(Status::Fail), 0);
}

/// Catches a VM whose balloon reports free memory passing unnoticed, and
/// the hold of a measuring ttp shown as a fault: a reporting device warns
/// with the remedy; the same machine while a ttp holds the order (its
/// record under run/ttp names the order found) passes.
#[test]
fn free_page_reporting_warns_unless_a_ttp_holds_it() {
    let f = tuned();
    f.put(
        "sys/module/page_reporting/parameters/page_reporting_order",
        "9\n",
    )
    .put(
        "sys/module/page_reporting/parameters/reported_kib",
        "2048\n",
    )
    .put(
        "sys/bus/virtio/drivers/virtio_balloon/virtio0/features",
        "0110010100000000\n",
    );
    let r = run_checks(f.0.clone(), &Fake::new(&f.0), Duration::from_secs(1));
    let i = item(&r, "page_reporting");
    assert_eq!(i.status, Status::Warn, "{i:#?}");
    assert!(i.detail.contains("order 9 and larger"), "{}", i.detail);
    assert!(i.detail.contains("2 MiB so far"), "{}", i.detail);
    assert!(
        i.remedy
            .as_deref()
            .unwrap()
            .contains("page_reporting_order")
    );

    f.put("sys/module/page_reporting/parameters/page_reporting_order", "10\n")
        .put(
            "run/ttp/page_reporting_order.json",
            r#"{"schema":"ttp.changed/1","setting":"page_reporting.page_reporting_order","path":"/x","original":"9","set_to":"10","pid":1}"#,
        );
    let r = run_checks(f.0.clone(), &Fake::new(&f.0), Duration::from_secs(1));
    let i = item(&r, "page_reporting");
    assert_eq!(i.status, Status::Pass, "{i:#?}");
    assert!(i.detail.contains("held at order 10"), "{}", i.detail);
    assert!(i.detail.contains("it was 9"), "{}", i.detail);
}
