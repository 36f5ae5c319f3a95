//! Kernel items: release and BTF (EMPv4, Sec. 4.4; TTPv2 Step 0 (3c)),
//! tracefs, taskstats (Sec. 3.1), delay accounting, HZ and USER_HZ
//! (Sec. 3.2).
use std::collections::BTreeMap;

use super::{
    item::{CheckItem, Fix, Probes, Status},
    read::Root,
    read::kernel_version,
};

/// ttp's ledger attaches to the block_io_start / block_io_done tracepoints,
/// new in 6.5.
const MIN_KERNEL: (u32, u32) = (6, 5);

pub(crate) fn release(release: Option<&str>) -> CheckItem {
    let src = "EMPv4 (Sec. 4.4): an up-to-date kernel; TTPv2 Step 0 (3c)";
    let Some(rel) = release else {
        return CheckItem::new(
            "kernel",
            "Kernel release",
            src,
            Status::Fail,
            "cannot read /proc/sys/kernel/osrelease",
        )
        .remedy("mount /proc");
    };
    match kernel_version(rel) {
        Some(v) if v >= MIN_KERNEL => {
            CheckItem::new("kernel", "Kernel release", src, Status::Pass, format!("Linux {rel}"))
        }
        Some(_) => CheckItem::new(
            "kernel",
            "Kernel release",
            src,
            Status::Fail,
            format!(
                "Linux {rel}: older than {}.{}, which ttp's ledger needs (block_io_start/block_io_done tracepoints)",
                MIN_KERNEL.0, MIN_KERNEL.1
            ),
        )
        .remedy("install a current kernel from the distribution (EMPv4 found an outdated kernel to be a source of variance)"),
        None => CheckItem::new("kernel", "Kernel release", src, Status::Warn, format!("cannot parse release {rel:?}"))
            .remedy("check `uname -r`"),
    }
}

pub(crate) fn btf(r: &Root) -> CheckItem {
    let src = "ttp's eBPF probes (BTF tracepoints)";
    if r.exists("sys/kernel/btf/vmlinux") {
        CheckItem::new(
            "btf",
            "Kernel BTF",
            src,
            Status::Pass,
            "/sys/kernel/btf/vmlinux present",
        )
    } else {
        CheckItem::new("btf", "Kernel BTF", src, Status::Fail, "/sys/kernel/btf/vmlinux absent")
            .remedy("use a kernel built with CONFIG_DEBUG_INFO_BTF=y (the default of current distribution kernels)")
    }
}

pub(crate) fn tracefs(r: &Root) -> CheckItem {
    let src = "classic tracepoints: perf, bpftrace, tracefs-based uprobes";
    let at = super::read::mounts_of(r, "tracefs");
    if let Some(m) = at.first() {
        CheckItem::new(
            "tracefs",
            "tracefs",
            src,
            Status::Pass,
            format!("mounted on {m}"),
        )
    } else {
        CheckItem::new(
            "tracefs",
            "tracefs",
            src,
            Status::Warn,
            "not mounted: classic tracepoints cannot be attached (ttp's ledger uses BTF tracepoints and does not need it)",
        )
        .remedy("mount -t tracefs nodev /sys/kernel/tracing")
        .fix(Fix::MountTracefs)
    }
}

pub fn taskstats(probes: &dyn Probes, kconfig: Option<&BTreeMap<String, String>>) -> CheckItem {
    let src = "EMP Sec. 3.1–3.2: PT from taskstats at µs resolution";
    match probes.taskstats_family() {
        Ok(id) => CheckItem::new(
            "taskstats",
            "taskstats",
            src,
            Status::Pass,
            format!("generic netlink family TASKSTATS available (id {id})"),
        ),
        Err(why) => {
            let cfg = kconfig
                .and_then(|k| k.get("CONFIG_TASKSTATS"))
                .map_or("unknown", |v| v.as_str());
            CheckItem::new(
                "taskstats",
                "taskstats",
                src,
                Status::Fail,
                format!("TASKSTATS netlink family not available ({why}); CONFIG_TASKSTATS = {cfg}"),
            )
            .remedy("use a kernel with CONFIG_TASKSTATS=y; without it PT falls back to the eBPF ledger only")
        }
    }
}

pub(crate) fn delay_accounting(
    r: &Root,
    release: Option<&str>,
    kconfig: Option<&BTreeMap<String, String>>,
) -> CheckItem {
    let (id, title) = ("delay_accounting", "Delay accounting");
    let src = "TTPv2 Sec. 3.5: BlockIO delay from taskstats";
    match r.line("proc/sys/kernel/task_delayacct").as_deref() {
        Some("1") => CheckItem::new(id, title, src, Status::Pass, "kernel.task_delayacct = 1"),
        Some(v) => CheckItem::new(
            id,
            title,
            src,
            Status::Warn,
            format!("kernel.task_delayacct = {v}: taskstats delay fields stay 0 for tasks started now"),
        )
        .remedy("sysctl -w kernel.task_delayacct=1 (`run` switches it on for a measurement and restores it; --fix leaves it on until reboot)")
        .fix(Fix::EnableDelayAccounting),
        None => {
            let compiled = kconfig.and_then(|k| k.get("CONFIG_TASK_DELAY_ACCT")).is_some();
            let old = release.and_then(kernel_version).is_some_and(|v| v < (5, 14));
            if compiled && old {
                // Before 5.14 there is no sysctl: on unless booted with nodelayacct.
                let off = r.read("proc/cmdline").is_some_and(|c| c.split_whitespace().any(|w| w == "nodelayacct"));
                if off {
                    CheckItem::new(id, title, src, Status::Warn, "booted with nodelayacct")
                        .remedy("remove nodelayacct from the kernel command line and reboot")
                } else {
                    CheckItem::new(id, title, src, Status::Pass, "on (kernels before 5.14 enable it at boot)")
                }
            } else {
                CheckItem::new(id, title, src, Status::Warn, "kernel without delay accounting (no kernel.task_delayacct)")
                    .remedy("use a kernel with CONFIG_TASK_DELAY_ACCT=y; without it delay fields are absent")
            }
        }
    }
}

pub(crate) fn hz(
    probes: &dyn Probes,
    kconfig: Option<&(String, BTreeMap<String, String>)>,
) -> CheckItem {
    let (id, title) = ("hz", "HZ and USER_HZ");
    let src = "EMP Sec. 3.2 and App. A; TTPv2 Sec. 3: tick granularity";
    let user_hz = probes.user_hz();
    let uh = user_hz.map_or("unknown".into(), |u| {
        format!("{u} (/proc ticks of {} ms)", 1000 / u.max(1))
    });
    let Some((from, k)) = kconfig else {
        return CheckItem::new(id, title, src, Status::Warn, format!("CONFIG_HZ unknown; USER_HZ = {uh}"))
            .remedy("load the configs module (modprobe configs) or install /boot/config-$(uname -r) so CONFIG_HZ can be read");
    };
    let hz = k
        .get("CONFIG_HZ")
        .cloned()
        .unwrap_or_else(|| "unknown".into());
    let tick = hz
        .parse::<u64>()
        .map_or(String::new(), |h| format!(" (tick {} ms)", 1000 / h.max(1)));
    let acct = if k.contains_key("CONFIG_VIRT_CPU_ACCOUNTING_GEN") {
        "VIRT_CPU_ACCOUNTING_GEN: user/system split measured at each transition"
    } else if k.contains_key("CONFIG_TICK_CPU_ACCOUNTING") {
        "TICK_CPU_ACCOUNTING: user/system split sampled per tick, their sum scaled to the exact runtime"
    } else {
        "CPU accounting mode unknown"
    };
    CheckItem::new(
        id,
        title,
        src,
        Status::Pass,
        format!("CONFIG_HZ = {hz}{tick} from {from}; USER_HZ = {uh}; {acct}"),
    )
}

/// Whether ttp can report its probes' own cost: the kernel's per-program
/// run counts and run times (BPF_ENABLE_STATS, kernel ≥ 5.8, root).
/// Measuring works without it, so a refusal only warns.
pub(crate) fn bpf_stats(r: &Root, probes: &dyn Probes) -> CheckItem {
    let src = "ttp: the probes' own cost in every result (kernel BPF statistics)";
    let sysctl = r
        .line("proc/sys/kernel/bpf_stats_enabled")
        .map(|v| format!("kernel.bpf_stats_enabled = {v}, left as it is"))
        .unwrap_or_else(|| "kernel.bpf_stats_enabled absent".into());
    match probes.bpf_stats() {
        Ok(()) => CheckItem::new(
            "bpf_stats",
            "BPF statistics",
            src,
            Status::Pass,
            format!("BPF_ENABLE_STATS accepted: reports give each probe's runs and ns a run ({sysctl}; ttp holds its own switch while measuring)"),
        ),
        Err(e) => CheckItem::new(
            "bpf_stats",
            "BPF statistics",
            src,
            Status::Warn,
            format!("BPF_ENABLE_STATS refused ({e}): reports cannot state the probes' own cost ({sysctl})"),
        )
        .remedy("run ttp as root (CAP_SYS_ADMIN) on a kernel ≥ 5.8"),
    }
}
