//! Virtualisation and steal time. A hypervisor can take the CPU away from
//! the guest (steal time) and change its frequency unseen: EMP's set-up
//! (Sec. 4, a dedicated machine) assumes neither.
use super::{
    item::{CheckItem, Probes, Status},
    procs::Window,
    read::Root,
};

/// DMI vendor / product strings of virtual machines.
const DMI_VM: &[&str] = &[
    "QEMU",
    "KVM",
    "VMware",
    "VirtualBox",
    "innotek",
    "Xen",
    "Microsoft Corporation Virtual Machine",
    "Amazon EC2",
    "Google Compute Engine",
    "Parallels",
    "Bochs",
    "BHYVE",
    "OpenStack",
    "Firecracker",
    "Cloud Hypervisor",
];

pub(crate) fn virtualization(r: &Root, probes: &dyn Probes) -> CheckItem {
    let (id, title) = ("virtualization", "Virtualisation");
    let src = "EMP Sec. 4: a dedicated machine; steal time and host frequency changes are invisible to a guest";
    let mut evidence = Vec::new();
    let dmi: Vec<String> = ["sys_vendor", "product_name", "board_vendor"]
        .iter()
        .filter_map(|f| r.line(&format!("sys/class/dmi/id/{f}")))
        .filter(|s| !s.is_empty())
        .collect();
    let dmi_joined = dmi.join(" ");
    if let Some(m) = DMI_VM.iter().find(|m| dmi_joined.contains(*m)) {
        evidence.push(format!("DMI says {m}"));
    }
    let hyper = r.read("proc/cpuinfo").is_some_and(|c| {
        c.lines()
            .any(|l| l.starts_with("flags") && l.split_whitespace().any(|w| w == "hypervisor"))
    });
    if hyper {
        evidence.push("CPU flag `hypervisor`".into());
    }
    let tool = probes.detect_virt();
    if let Some(t) = tool.as_deref().filter(|t| *t != "none") {
        evidence.push(format!("systemd-detect-virt: {t}"));
    }
    if evidence.is_empty() {
        let how = if tool.is_some() {
            "systemd-detect-virt: none"
        } else if dmi.is_empty() {
            "no DMI, no hypervisor flag"
        } else {
            "DMI and CPU flags show no hypervisor"
        };
        CheckItem::new(id, title, src, Status::Pass, format!("bare metal ({how})"))
    } else {
        CheckItem::new(id, title, src, Status::Warn, format!("virtualised: {}", evidence.join("; "))).remedy(
            "measure on bare metal for publishable numbers; on a VM use dedicated (pinned) vCPUs and compare PT rather than ET (Sec. 4.1)",
        )
    }
}

pub(crate) fn steal(w: &Window) -> CheckItem {
    let (id, title) = ("steal_time", "Steal time");
    let src = "EMP Sec. 4.1: time taken away from the program shows in ET, not in PT";
    let (Some(b), Some(a)) = (w.stat_before, w.stat_after) else {
        return CheckItem::new(id, title, src, Status::Warn, "cannot read /proc/stat")
            .remedy("mount /proc");
    };
    let dt = a.total.saturating_sub(b.total);
    let ds = a.steal.saturating_sub(b.steal);
    let pct = |s: u64, t: u64| {
        if t == 0 {
            0.0
        } else {
            100.0 * s as f64 / t as f64
        }
    };
    let window = pct(ds, dt);
    let boot = pct(a.steal, a.total);
    let detail = format!(
        "{window:.2} % of CPU time stolen during the {:.1} s sample, {boot:.3} % since boot",
        w.elapsed.as_secs_f64()
    );
    if ds == 0 && a.steal == 0 {
        CheckItem::new(id, title, src, Status::Pass, detail)
    } else {
        CheckItem::new(id, title, src, Status::Warn, detail).remedy(
            "the hypervisor runs other work on these CPUs: use dedicated vCPUs or bare metal; rely on PT, which excludes stolen time",
        )
    }
}

/// Free page reporting (sys/page_reporting.rs): memory a VM hands back to
/// its hypervisor costs system time when it is touched again.
pub(crate) fn page_reporting(r: &Root) -> CheckItem {
    let (id, title) = ("page_reporting", "Free page reporting");
    let src = "TTPv2 Step 0 (Sec. 8.1): the machine in the same state before every QE; memory the host took back is faulted in again as the guest's system time";
    let Some(s) = crate::sys::page_reporting::state(&r.path("")) else {
        return CheckItem::new(id, title, src, Status::Pass, "not in this kernel");
    };
    if !s.device {
        return CheckItem::new(
            id,
            title,
            src,
            Status::Pass,
            format!(
                "built in (order {}), no device reports free memory",
                s.order
            ),
        );
    }
    let held = r
        .read("run/ttp/page_reporting_order.json")
        .and_then(|j| serde_json::from_str::<serde_json::Value>(&j).ok())
        .filter(|c| c["set_to"].as_str() == Some(s.order.as_str()));
    if let Some(c) = held {
        return CheckItem::new(
            id,
            title,
            src,
            Status::Pass,
            format!(
                "held at order {} by a ttp that measures (it was {})",
                s.order,
                c["original"].as_str().unwrap_or("?")
            ),
        );
    }
    let so_far = s
        .reported_kib
        .map(|k| format!(", {} MiB so far", k / 1024))
        .unwrap_or_default();
    CheckItem::new(
        id,
        title,
        src,
        Status::Warn,
        format!(
            "the VM hands free memory in blocks of order {} and larger back to its hypervisor (virtio-balloon free page reporting{so_far}); touching it again costs system time",
            s.order
        ),
    )
    .remedy(format!(
        "`run` holds the order at its largest while it measures and restores it; for other measurements: echo 10 > /sys/module/page_reporting/parameters/page_reporting_order (and back to {} after)",
        s.order
    ))
}
