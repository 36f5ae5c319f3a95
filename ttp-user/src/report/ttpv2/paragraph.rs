//! TTPv2's reporting paragraph (Sec. 9) in words: the two paragraphs a
//! paper using TTPv2 prints, from the facts the protocol gathered
//! (`ttp_ttpv2::paragraph::Paragraph`). This text is the `paragraph` of the
//! run and analyze JSON and the end of the terminal report.
use ttp_ttpv2::paragraph::{Cache, Deviation, Paragraph, ProbeCostFigures};
use ttp_ttpv2::paragraph_deviations::{ColdCacheShortfall, SetupItem};

/// A value to two significant digits (Sec. 9 (8), (9)).
pub(crate) fn sig2(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return "0".into();
    }
    let mag = x.abs().log10().floor() as i32;
    let rounded = {
        let f = 10f64.powi(1 - mag);
        (x * f).round() / f
    };
    // Rounding may carry into the next decade (9.96 → 10).
    let mag = rounded.abs().log10().floor() as i32;
    let decimals = (1 - mag).max(0) as usize;
    format!("{rounded:.decimals$}")
}

fn pct(part: usize, whole: usize) -> String {
    if whole == 0 {
        "0".into()
    } else {
        sig2(part as f64 * 100.0 / whole as f64)
    }
}

/// Longest detail quoted from one check item.
const DETAIL_CHARS: usize = 90;

fn setup_check(items: &[SetupItem]) -> String {
    if items.is_empty() {
        return "the Step 0 check (ttp-ebpf check, before the first QE) found nothing to warn of"
            .into();
    }
    let items: Vec<String> = items
        .iter()
        .map(|i| {
            let mut detail: String = i.detail.chars().take(DETAIL_CHARS).collect();
            if i.detail.chars().count() > DETAIL_CHARS {
                detail.push('…');
            }
            let what = if i.failed { "failed" } else { "warned" };
            format!("{} {what} ({detail})", i.title)
        })
        .collect();
    format!(
        "the Step 0 check (ttp-ebpf check, before the first QE; the snapshot is in the JSON) reported: {}",
        items.join("; ")
    )
}

fn cold_cache(s: &ColdCacheShortfall) -> String {
    match s {
        ColdCacheShortfall::NotRecorded { missing, qes } => format!(
            "the cold-cache procedure is not recorded for {missing} of {qes} QEs (the page cache was dropped; whether the disk caches were filled is not known)"
        ),
        ColdCacheShortfall::FillSkipped { qes, reasons } => format!(
            "the disk and controller cache fill (Sec. 3.1: 64 MB of unrelated data) was skipped or cut short before {qes} QE(s): {}",
            reasons.join("; ")
        ),
        ColdCacheShortfall::DropUnchecked { qes } => format!(
            "whether the page cache drop took effect could not be checked before {qes} QE(s)"
        ),
        ColdCacheShortfall::DropIneffective { qes } => format!(
            "a file read again after the page cache drop did not reach the device before {qes} QE(s), so the drop did not take full effect"
        ),
    }
}

fn online(cores: Option<u32>) -> String {
    cores
        .map(|c| format!(" of the {c} online CPUs"))
        .unwrap_or_default()
}

/// One deviation (Sec. 9 (6)) as the paragraph states it.
pub(crate) fn deviation_text(d: &Deviation) -> String {
    match d {
        Deviation::Cores { cores: c } => format!(
            "{c} CPU cores were enabled instead of one (overall ticks are summed over them; checks QE6 and QE7 allow {c} × Time_meas)"
        ),
        Deviation::IowaitUnscaled { cores: c, share_known } => format!(
            "eq. 1 halves, and QE9 compares, the IOWait summed over all {c} CPUs, unscaled, so another process's I/O wait on an idle CPU counts as if it were the query's{}",
            if *share_known {
                "; Time_calc with the query's own share of that IOWait (the ledger's iowait_share_ns) in place of the half is reported beside it"
            } else {
                ""
            }
        ),
        Deviation::Pinned { cpus, online: o } => {
            let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
            format!(
                "ttp and the query it started were pinned to CPU{} {} ({}{}, by their affinity mask); the overall /proc/stat counters still sum over every online CPU",
                if cpus.len() == 1 { "" } else { "s" },
                list.join(","),
                cpus.len(),
                online(*o)
            )
        }
        Deviation::CgroupQuota {
            cgroup,
            cpus,
            quota_us,
            period_us,
            online: o,
        } => format!(
            "ttp and the query it started ran in cgroup {cgroup}, whose CPU quota limits them to {} CPUs' worth of time ({quota_us} µs per {period_us} µs){}; the overall /proc/stat counters still sum over every online CPU",
            sig2(*cpus),
            online(*o)
        ),
        Deviation::VirtualMachine { hypervisor: v } => {
            // collect/machine.rs already words it "virtual machine (kvm)";
            // older files hold the bare hypervisor name.
            let what = if v.starts_with("virtual machine") {
                v.clone()
            } else {
                format!("virtual machine ({v})")
            };
            format!("the machine is a {what}, so steal time may occur")
        }
        Deviation::Steal { qes: 0, of, .. } => {
            format!("no steal time was measured during the {of} QEs")
        }
        Deviation::Steal { qes, of, ticks } => format!(
            "steal time was measured during {qes} of {of} QEs ({ticks} ticks in all; X5 counts them)"
        ),
        Deviation::SetupCheck { items } => setup_check(items),
        Deviation::ClockRates { config_hz, user_hz } => format!(
            "the kernel accounts CPU time at CONFIG_HZ={config_hz} and reports it in USER_HZ={user_hz} ticks"
        ),
        Deviation::DelayAccountingSwitchedOn => "delay accounting (kernel.task_delayacct) was switched on for the measurement and restored afterwards".into(),
        Deviation::WarmCache => {
            "warm-cache measurement (the page cache was not dropped before each QE)".into()
        }
        Deviation::ColdCache(s) => cold_cache(s),
        Deviation::QueryTree { most } => format!(
            "the query is the measured command's whole process tree, its processes' measures summed (at most {most} process{} in one QE), where the paper times one DBMS query process (Sec. 7.2)",
            if *most == 1 { "" } else { "es" }
        ),
        Deviation::Warmups { n } => format!(
            "{n} warm-up execution(s) of each query ran before its first QE, after the same steps as a QE, and were measured and not kept"
        ),
        Deviation::UserHz { hz } => format!(
            "/proc ticks are {} ms (USER_HZ={hz}), not 10 ms",
            1000 / (*hz).max(1)
        ),
        Deviation::Qe10Spread => {
            "QE10 and QC2 judge a QE against the spread of the other QEs of its Q@C".into()
        }
        Deviation::Stated { text } => text.clone(),
    }
}

/// What measuring cost the measured; Sec. 9 asks for the tool that
/// measured, and its cost belongs beside it.
fn probe_cost_sentence(c: &ProbeCostFigures) -> String {
    let per_switch = c
        .ns_per_switch
        .map(|ns| format!("; {} ns per context switch", sig2(ns)))
        .unwrap_or_default();
    let missed = if c.events_missed > 0 {
        format!("; {} events never reached the probes", c.events_missed)
    } else {
        String::new()
    };
    format!(
        " By the kernel's BPF statistics, the ledger's probes used a median of {}% of Time_meas in CPU time per execution (at most {}%{per_switch}{missed}).",
        sig2(c.median_percent),
        sig2(c.max_percent)
    )
}

/// The two paragraphs of Sec. 9.
pub fn text(p: &Paragraph) -> String {
    // (1) protocol, (2) hardware, (3) operating system.
    let mut s = String::from(
        "The measurements were collected using Tucson Timing Protocol Version 2 (TTPv2) [Currim, Snodgrass, Suh, Zhang, ACM TODS 2016]",
    );
    if let Some(tool) = &p.tool {
        s += &format!(" as implemented by {tool}");
    }
    let mut hw = Vec::new();
    if let Some(cpu) = &p.cpu_model {
        let cores = p.cores.map(|c| format!(" ({c} cores)")).unwrap_or_default();
        hw.push(format!("an {cpu}{cores}"));
    }
    if let Some(mem) = p.memory_bytes {
        hw.push(format!(
            "{:.1} GiB of memory",
            mem as f64 / (1u64 << 30) as f64
        ));
    }
    if let Some(disk) = &p.disk {
        hw.push(format!("disk {disk}"));
    }
    if hw.is_empty() {
        s += " (the hardware was not recorded)";
    } else {
        s += &format!(" on {}", hw.join(", "));
    }
    match (&p.os, &p.kernel) {
        (Some(os), Some(k)) => s += &format!(", running {os} with the {k} kernel"),
        (Some(os), None) => s += &format!(", running {os}"),
        (None, Some(k)) => s += &format!(", running Linux {k}"),
        (None, None) => {}
    }
    // (4) QEs per Q@C, (5) computed measures and units.
    let times = match p.qes_per_qc.as_slice() {
        [n] => format!("{n} times"),
        per => format!(
            "{} times",
            per.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    };
    let cache = match p.cache {
        Some(Cache::Cold) => " with a cold cache",
        Some(Cache::Dropped) => " with the page cache dropped before each QE",
        Some(Cache::Warm) => " with a warm cache",
        None => "",
    };
    s += &format!(
        ". The protocol executed the query {times} at each cardinality{cache} ({} Q@C{}) and provided calculated query evaluation time, including computation and I/O time, in msec, as the median over the retained executions",
        p.qcs,
        if p.qcs == 1 { "" } else { "s" }
    );
    if p.exact_reported {
        s += ", reported beside the exact on-CPU plus own-I/O time measured by an in-kernel eBPF ledger";
    }
    s += ".";
    if let Some(cost) = &p.probe_cost {
        s += &probe_cost_sentence(cost);
    }
    // (6) deviations.
    if p.deviations.is_empty() {
        s += " The protocol was utilized exactly as specified.";
    } else {
        let dev: Vec<String> = p.deviations.iter().map(deviation_text).collect();
        s += &format!(" Deviations from the protocol: {}.", dev.join("; "));
    }

    // (7) experiment-wide checks.
    s += "\n\n";
    let x = &p.experiment_checks;
    let violated: Vec<String> = x
        .violated
        .iter()
        .map(|(id, name, n)| format!("{id} ({}: {n})", name.trim_start_matches("Number of ")))
        .collect();
    let na = &x.not_applicable;
    if x.total > 0 && na.len() == x.total {
        s += "The experiment-wide sanity checks could not be applied to this data";
    } else if violated.is_empty() {
        s += "No runs violated the experiment-wide sanity checks";
    } else {
        s += &format!(
            "The experiment-wide sanity checks found violations: {}",
            violated.join(", ")
        );
    }
    if !na.is_empty() && na.len() < x.total {
        s += &format!(" ({} could not be applied to this data)", na.join(", "));
    }
    // (8) QEs and Q@Cs dropped.
    s += &format!(
        ". Approximately {}% of the query executions and {}% of the queries-at-cardinality (Q@Cs) were dropped due to query execution and Q@C sanity checks.",
        pct(p.qes_dropped, p.qes_total),
        pct(p.qcs_dropped, p.qcs)
    );
    // (9) the first three post checks.
    match p.excessive_variation_percent {
        Some(v) => {
            s += &format!(
                " As a result, excessive variation in calculated query time was observed in {}% of the Q@Cs.",
                sig2(v)
            )
        }
        None => s += " No Q@C was retained, so the post checks could not be applied.",
    }
    match p.monotonicity_percent {
        Some(m) => {
            s += &format!(
                " A total of {}% of the Q@Cs violated relaxed monotonicity and {}% violated strict monotonicity (of the Q@Cs compared with the next higher cardinality of their query, as Table XII counts them; relaxed: the lower cardinality still took longer after each Q@C's time was moved by half its own standard deviation toward the other's; App. E QC (4) does not say whose standard deviation, so this reading is ttp's own).",
                sig2(m.relaxed),
                sig2(m.strict)
            )
        }
        None => {
            s += " Monotonicity was not examined: the retained Q@Cs do not cover two cardinalities of one query."
        }
    }
    s
}

#[cfg(test)]
mod tests;
