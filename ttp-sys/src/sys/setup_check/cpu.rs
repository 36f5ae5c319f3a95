//! CPU items: online CPUs and SMT (TTPv2 Step 0 (3a): one core), the
//! cpufreq governor and frequency range (EMPv3, Sec. 4.3: SpeedStep off),
//! turbo/boost (EMPv3; TTPv2 Step 0 (3b)).
use super::{
    item::{CheckItem, Fix, Status},
    read::Root,
    read::parse_cpu_list,
};

const SYS_CPU: &str = "sys/devices/system/cpu";

pub(crate) fn items(r: &Root) -> Vec<CheckItem> {
    let online = r
        .line(&format!("{SYS_CPU}/online"))
        .and_then(|s| parse_cpu_list(&s));
    vec![
        cpus(online.as_deref()),
        smt(r),
        cpufreq(r, online.as_deref().unwrap_or(&[0])),
        turbo(r),
    ]
}

fn cpus(online: Option<&[u32]>) -> CheckItem {
    let (id, title, src) = (
        "cpus",
        "Online CPUs",
        "TTPv2 Step 0 (3a): enable only one CPU core",
    );
    match online {
        None => CheckItem::new(id, title, src, Status::Warn, format!("cannot read /{SYS_CPU}/online"))
            .remedy("mount sysfs"),
        Some([one]) => CheckItem::new(id, title, src, Status::Pass, format!("1 CPU online (cpu{one})")),
        Some(list) => CheckItem::new(
            id,
            title,
            src,
            Status::Warn,
            format!("{} CPUs online {list:?}: the program may migrate between CPUs and share them with daemons", list.len()),
        )
        .remedy(format!(
            "pin the program to one CPU (taskset -c {} CMD) or take the others offline: echo 0 > /sys/devices/system/cpu/cpuN/online",
            list.last().unwrap_or(&0)
        )),
    }
}

fn smt(r: &Root) -> CheckItem {
    let (id, title, src) = (
        "smt",
        "SMT (hyper-threading)",
        "TTPv2 Step 0 (3a): one core, no sibling threads",
    );
    let remedy = "echo off > /sys/devices/system/cpu/smt/control (or disable SMT in the firmware)";
    match r.line(&format!("{SYS_CPU}/smt/control")).as_deref() {
        Some("on") => CheckItem::new(
            id,
            title,
            src,
            Status::Warn,
            "SMT on: a daemon on the sibling thread slows the program without taking its CPU time",
        )
        .remedy(remedy),
        Some(s @ ("off" | "forceoff")) => {
            CheckItem::new(id, title, src, Status::Pass, format!("SMT {s}"))
        }
        Some(s @ ("notsupported" | "notimplemented")) => {
            CheckItem::new(id, title, src, Status::Pass, format!("no SMT ({s})"))
        }
        other => {
            // Older kernels: one thread per core unless siblings are listed.
            let sib = r.line(&format!("{SYS_CPU}/cpu0/topology/thread_siblings_list"));
            match sib.as_deref().and_then(parse_cpu_list) {
                Some(s) if s.len() > 1 => CheckItem::new(
                    id,
                    title,
                    src,
                    Status::Warn,
                    format!("cpu0 has SMT siblings {s:?}"),
                )
                .remedy(remedy),
                Some(_) => CheckItem::new(id, title, src, Status::Pass, "one thread per core"),
                None => CheckItem::new(
                    id,
                    title,
                    src,
                    Status::Warn,
                    format!(
                        "SMT state not exposed ({})",
                        other.unwrap_or("no smt/control")
                    ),
                )
                .remedy("check the firmware settings for hyper-threading"),
            }
        }
    }
}

fn cpufreq(r: &Root, online: &[u32]) -> CheckItem {
    let (id, title) = ("cpufreq", "CPU frequency (governor, SpeedStep)");
    let src = "EMPv3 (Sec. 4.3): switch off SpeedStep so the clock rate stays fixed";
    let mut governors = Vec::new();
    let mut ranges = Vec::new();
    for c in online {
        let base = format!("{SYS_CPU}/cpu{c}/cpufreq");
        if let Some(g) = r.line(&format!("{base}/scaling_governor")) {
            governors.push((*c, g));
        }
        let f = |n: &str| {
            r.line(&format!("{base}/{n}"))
                .and_then(|s| s.parse::<u64>().ok())
        };
        if let (Some(lo), Some(hi)) = (f("scaling_min_freq"), f("scaling_max_freq")) {
            ranges.push((*c, lo, hi));
        }
    }
    if governors.is_empty() {
        return CheckItem::new(
            id,
            title,
            src,
            Status::Warn,
            "no cpufreq interface: the frequency is not visible here (on a VM the host controls it)",
        )
        .remedy("on bare metal load the cpufreq driver (intel_pstate, acpi-cpufreq, amd-pstate); on a VM ask the host to fix the frequency and disable turbo");
    }
    let not_perf: Vec<u32> = governors
        .iter()
        .filter(|(_, g)| g != "performance")
        .map(|(c, _)| *c)
        .collect();
    let varying: Vec<&(u32, u64, u64)> = ranges.iter().filter(|(_, lo, hi)| lo != hi).collect();
    let gov_text: Vec<String> = governors
        .iter()
        .map(|(c, g)| format!("cpu{c} {g}"))
        .collect();
    let range_text = varying
        .first()
        .map(|(c, lo, hi)| {
            format!(
                "; cpu{c} may run between {} and {} MHz",
                lo / 1000,
                hi / 1000
            )
        })
        .unwrap_or_default();
    let detail = format!("governor: {}{range_text}", gov_text.join(", "));
    if not_perf.is_empty() && varying.is_empty() {
        return CheckItem::new(
            id,
            title,
            src,
            Status::Pass,
            format!("{detail}; frequency pinned"),
        );
    }
    let mut item = CheckItem::new(id, title, src, Status::Warn, detail).remedy(
        "cpupower frequency-set -g performance, and pin the range: cpupower frequency-set -d F -u F (F = the nominal frequency)",
    );
    if !not_perf.is_empty() {
        item = item.fix(Fix::GovernorPerformance { cpus: not_perf });
    }
    item
}

fn turbo(r: &Root) -> CheckItem {
    let (id, title) = ("turbo", "Turbo / boost");
    let src = "EMPv3 (Sec. 4.3): switch off Turbo mode; TTPv2 Step 0 (3b)";
    let no_turbo = format!("{SYS_CPU}/intel_pstate/no_turbo");
    let boost = format!("{SYS_CPU}/cpufreq/boost");
    if let Some(v) = r.line(&no_turbo) {
        return if v == "1" {
            CheckItem::new(
                id,
                title,
                src,
                Status::Pass,
                "turbo off (intel_pstate/no_turbo = 1)",
            )
        } else {
            CheckItem::new(
                id,
                title,
                src,
                Status::Warn,
                "turbo on (intel_pstate/no_turbo = 0)",
            )
            .remedy(format!("echo 1 > /{no_turbo}"))
            .fix(Fix::DisableTurbo {
                path: format!("/{no_turbo}"),
                value: "1".into(),
            })
        };
    }
    if let Some(v) = r.line(&boost) {
        return if v == "0" {
            CheckItem::new(
                id,
                title,
                src,
                Status::Pass,
                "boost off (cpufreq/boost = 0)",
            )
        } else {
            CheckItem::new(id, title, src, Status::Warn, "boost on (cpufreq/boost = 1)")
                .remedy(format!("echo 0 > /{boost}"))
                .fix(Fix::DisableTurbo {
                    path: format!("/{boost}"),
                    value: "0".into(),
                })
        };
    }
    CheckItem::new(
        id,
        title,
        src,
        Status::Warn,
        "turbo state not exposed (no intel_pstate/no_turbo, no cpufreq/boost)",
    )
    .remedy("disable Turbo Boost / Core Performance Boost in the firmware; on a VM ask the host")
}
