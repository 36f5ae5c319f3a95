//! Processes: the papers' non-critical daemons (EMPv1, Sec. 4.1 and App. C
//! Table XXVII; TTPv2 App. A Table XVIII) and other busy processes,
//! sampled over one window together with /proc/stat.
use std::{collections::BTreeMap, time::Duration};

use super::{
    item::{CheckItem, Probes, Status},
    read::{CpuTicks, ProcSample, Root, parse_proc_stat, processes},
};

/// A daemon the papers stopped, with the name it runs under and its unit.
pub(crate) struct KnownDaemon {
    /// Process name (comm, ≤ 15 bytes).
    pub comm: &'static str,
    /// systemd unit to stop.
    pub unit: &'static str,
    pub source: &'static str,
}

const EMP: &str = "EMP App. C";
const TTP: &str = "TTPv2 App. A";
const BOTH: &str = "EMP App. C, TTPv2 App. A";
const LATER: &str = "current equivalent";

/// EMP App. C (Table XXVII) and TTPv2 App. A (Table XVIII), by the names
/// their processes run under today, plus current distributions' equivalents
/// of the same jobs (marked). iptables/ip6tables are listed by both papers
/// but load rules and exit: there is no process to find.
pub(crate) const NON_CRITICAL: &[KnownDaemon] = &[
    KnownDaemon {
        comm: "abrtd",
        unit: "abrtd",
        source: BOTH,
    },
    KnownDaemon {
        comm: "abrt-dump-journ",
        unit: "abrt-journal-core",
        source: BOTH,
    },
    KnownDaemon {
        comm: "acpid",
        unit: "acpid",
        source: BOTH,
    },
    KnownDaemon {
        comm: "atd",
        unit: "atd",
        source: BOTH,
    },
    KnownDaemon {
        comm: "auditd",
        unit: "auditd",
        source: BOTH,
    },
    KnownDaemon {
        comm: "certmonger",
        unit: "certmonger",
        source: BOTH,
    },
    KnownDaemon {
        comm: "crond",
        unit: "crond",
        source: BOTH,
    },
    KnownDaemon {
        comm: "cron",
        unit: "cron",
        source: LATER,
    },
    KnownDaemon {
        comm: "anacron",
        unit: "anacron",
        source: LATER,
    },
    KnownDaemon {
        comm: "cupsd",
        unit: "cups",
        source: BOTH,
    },
    KnownDaemon {
        comm: "cups-browsed",
        unit: "cups-browsed",
        source: LATER,
    },
    KnownDaemon {
        comm: "hald",
        unit: "haldaemon",
        source: BOTH,
    },
    KnownDaemon {
        comm: "hpssd",
        unit: "hplip",
        source: TTP,
    },
    KnownDaemon {
        comm: "master",
        unit: "postfix",
        source: BOTH,
    },
    KnownDaemon {
        comm: "qmgr",
        unit: "postfix",
        source: BOTH,
    },
    KnownDaemon {
        comm: "pickup",
        unit: "postfix",
        source: BOTH,
    },
    KnownDaemon {
        comm: "sendmail",
        unit: "sendmail",
        source: TTP,
    },
    KnownDaemon {
        comm: "vmware-usbarbit",
        unit: "vmware-USBArbitrator",
        source: BOTH,
    },
    KnownDaemon {
        comm: "vmtoolsd",
        unit: "vmtoolsd",
        source: EMP,
    },
    KnownDaemon {
        comm: "xinetd",
        unit: "xinetd",
        source: BOTH,
    },
    KnownDaemon {
        comm: "packagekitd",
        unit: "packagekit",
        source: LATER,
    },
    KnownDaemon {
        comm: "unattended-upgr",
        unit: "unattended-upgrades",
        source: LATER,
    },
    KnownDaemon {
        comm: "snapd",
        unit: "snapd",
        source: LATER,
    },
    KnownDaemon {
        comm: "fwupd",
        unit: "fwupd",
        source: LATER,
    },
    KnownDaemon {
        comm: "avahi-daemon",
        unit: "avahi-daemon",
        source: LATER,
    },
    KnownDaemon {
        comm: "bluetoothd",
        unit: "bluetooth",
        source: LATER,
    },
    KnownDaemon {
        comm: "ModemManager",
        unit: "ModemManager",
        source: LATER,
    },
    KnownDaemon {
        comm: "updatedb",
        unit: "plocate-updatedb.timer",
        source: LATER,
    },
    KnownDaemon {
        comm: "rhsmcertd",
        unit: "rhsmcertd",
        source: EMP,
    },
    KnownDaemon {
        comm: "rhnsd",
        unit: "rhnsd",
        source: EMP,
    },
];

/// A process is busy when it used more than this share of one CPU.
pub(crate) const BUSY_CPU_PERCENT: f64 = 2.0;

/// One sampling window: /proc/stat and every process, before and after.
pub struct Window {
    pub elapsed: Duration,
    pub stat_before: Option<CpuTicks>,
    pub stat_after: Option<CpuTicks>,
    pub before: Vec<ProcSample>,
    pub after: Vec<ProcSample>,
}

pub(crate) fn sample(r: &Root, probes: &dyn Probes, d: Duration) -> Window {
    let stat_before = r.read("proc/stat").as_deref().and_then(parse_proc_stat);
    let before = processes(r);
    let elapsed = probes.pause(d);
    Window {
        elapsed,
        stat_before,
        stat_after: r.read("proc/stat").as_deref().and_then(parse_proc_stat),
        before,
        after: processes(r),
    }
}

pub(crate) fn daemons(procs: &[ProcSample]) -> CheckItem {
    let (id, title) = ("noncritical_daemons", "Non-critical daemons");
    let src = "EMPv1 (Sec. 4.1, App. C); TTPv2 Step 0 (3d), App. A";
    let mut found: BTreeMap<&str, (Vec<u32>, &KnownDaemon)> = BTreeMap::new();
    for p in procs {
        if let Some(k) = NON_CRITICAL.iter().find(|k| k.comm == p.comm) {
            found
                .entry(k.comm)
                .or_insert_with(|| (Vec::new(), k))
                .0
                .push(p.pid);
        }
    }
    if found.is_empty() {
        return CheckItem::new(
            id,
            title,
            src,
            Status::Pass,
            "none of the listed daemons is running",
        );
    }
    let list: Vec<String> = found
        .iter()
        .map(|(c, (pids, k))| format!("{c} {pids:?} ({})", k.source))
        .collect();
    let mut units: Vec<&str> = found.values().map(|(_, k)| k.unit).collect();
    units.dedup();
    CheckItem::new(
        id,
        title,
        src,
        Status::Warn,
        format!("running: {}", list.join(", ")),
    )
    .remedy(format!(
        "stop them for the measurement: systemctl stop {} (they are not restarted by ttp)",
        units.join(" ")
    ))
}

pub(crate) fn busy(w: &Window, probes: &dyn Probes) -> CheckItem {
    let (id, title) = ("busy_processes", "Other busy processes");
    let src = "EMPv1 (Sec. 4.1): other processes compete with the program";
    let user_hz = probes.user_hz().unwrap_or(100) as f64;
    let secs = w.elapsed.as_secs_f64();
    if secs <= 0.0 {
        return CheckItem::new(
            id,
            title,
            src,
            Status::Pass,
            "not sampled (zero-length window)",
        );
    }
    let own = probes.own_pid();
    let before: BTreeMap<(u32, u64), u64> = w
        .before
        .iter()
        .map(|p| ((p.pid, p.start_ticks), p.cpu_ticks))
        .collect();
    let mut busy: Vec<(f64, &ProcSample)> = w
        .after
        .iter()
        .filter(|p| p.pid != own)
        .filter_map(|p| {
            let b = before.get(&(p.pid, p.start_ticks))?;
            let pct = 100.0 * p.cpu_ticks.saturating_sub(*b) as f64 / user_hz / secs;
            (pct > BUSY_CPU_PERCENT).then_some((pct, p))
        })
        .collect();
    busy.sort_by(|a, b| b.0.total_cmp(&a.0));
    if busy.is_empty() {
        return CheckItem::new(
            id,
            title,
            src,
            Status::Pass,
            format!(
                "no process used more than {BUSY_CPU_PERCENT} % of a CPU during the {secs:.1} s sample"
            ),
        );
    }
    let list: Vec<String> = busy
        .iter()
        .take(8)
        .map(|(pct, p)| format!("{} [{}] {pct:.0} %", p.comm, p.pid))
        .collect();
    CheckItem::new(
        id,
        title,
        src,
        Status::Warn,
        format!("{} process(es) above {BUSY_CPU_PERCENT} % of a CPU: {}", busy.len(), list.join(", ")),
    )
    .remedy("stop them or measure when the machine is idle: they take CPU time, caches and memory bandwidth from the program")
}
