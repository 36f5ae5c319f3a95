//! The reporting paragraph of Sec. 9: the nine pieces of information a
//! paper using TTPv2 states, filled in from the machine and the results.

use super::checks::{CheckResult, Scope};
use super::model::QcInput;
use super::paragraph_deviations::cold_cache_shortfalls;
use super::paragraph_deviations::{query_tree, setup_check_warnings, steal_measured};

use ttp_ledger::collect::machine::MachineFacts;

/// Everything the paragraph states.
pub struct ParagraphInput<'a> {
    pub machine: Option<&'a MachineFacts>,
    pub qcs: &'a [QcInput],
    pub checks: &'a [CheckResult],
    pub qes_total: usize,
    pub qes_dropped: usize,
    pub qcs_dropped: usize,
    /// The ledger's exact time was reported beside Time_calc.
    pub exact_reported: bool,
}

/// A value to two significant digits (Sec. 9 (8), (9)).
pub fn sig2(x: f64) -> String {
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

/// Deviations from the protocol as specified (Sec. 8.1 Step 0, Sec. 9 (6)).
pub fn deviations(machine: Option<&MachineFacts>, qcs: &[QcInput]) -> Vec<String> {
    let mut d = Vec::new();
    let cpus = machine
        .and_then(|m| m.cores)
        .or_else(|| qcs.iter().map(|q| q.setup.cpus).max());
    if let Some(c) = cpus.filter(|&c| c > 1) {
        d.push(format!(
            "{c} CPU cores were enabled instead of one (overall ticks are summed over them; checks QE6 and QE7 allow {c} × Time_meas)"
        ));
        // Eq. 1 and QE9 take the overall IOWait unscaled (docs/ttpv2.md,
        // "More than one CPU"); the ledger's share of it is the measured
        // alternative to eq. 1's 0.5 (calc.rs, others_fraction_measured).
        let share_known = qcs.iter().flat_map(|q| &q.qes).any(|qe| {
            qe.processes.iter().any(|p| {
                p.class == ttp_window::window::record::ProcessClass::Query
                    && p.m.ledger.iowait_share_ns.is_some()
            })
        });
        d.push(format!(
            "eq. 1 halves, and QE9 compares, the IOWait summed over all {c} CPUs, unscaled, so another process's I/O wait on an idle CPU counts as if it were the query's{}",
            if share_known {
                "; Time_calc with the query's own share of that IOWait (the ledger's iowait_share_ns) in place of the half is reported beside it"
            } else {
                ""
            }
        ));
    }
    if let Some(m) = machine {
        d.extend(cpu_restrictions(m));
        if let Some(v) = &m.virtualization {
            // collect/machine.rs already words it "virtual machine (kvm)";
            // older files hold the bare hypervisor name.
            let what = if v.starts_with("virtual machine") {
                v.clone()
            } else {
                format!("virtual machine ({v})")
            };
            d.push(format!("the machine is a {what}, so steal time may occur"));
        }
        if m.virtualization.is_some() || steal_measured(qcs).is_some_and(|(n, _, _)| n > 0) {
            d.extend(steal_measured(qcs).map(|(n, k, ticks)| {
                if n == 0 {
                    format!("no steal time was measured during the {k} QEs")
                } else {
                    format!("steal time was measured during {n} of {k} QEs ({ticks} ticks in all; X5 counts them)")
                }
            }));
        }
        d.extend(setup_check_warnings(m));
        if let (Some(h), Some(u)) = (m.config_hz, m.user_hz)
            && h != u
        {
            d.push(format!(
                "the kernel accounts CPU time at CONFIG_HZ={h} and reports it in USER_HZ={u} ticks"
            ));
        }
        if m.delay_accounting_switched_on {
            d.push("delay accounting (kernel.task_delayacct) was switched on for the measurement and restored afterwards".into());
        }
        if m.cold_cache == Some(false) {
            d.push("warm-cache measurement (the page cache was not dropped before each QE)".into());
        }
        if m.cold_cache == Some(true) {
            d.extend(cold_cache_shortfalls(qcs));
        }
        d.extend(m.deviations.iter().cloned());
    }
    d.extend(query_tree(qcs));
    if let Some(n) = qcs
        .iter()
        .map(|q| q.setup.warmup.len())
        .max()
        .filter(|&n| n > 0)
    {
        d.push(format!(
            "{n} warm-up execution(s) of each query ran before its first QE, after the same steps as a QE, and were measured and not kept"
        ));
    }
    d.extend(qcs.iter().filter_map(|q| {
        let name = (qcs.len() > 1).then(|| q.name());
        q.setup.recovery.statement(name.as_deref())
    }));
    if let Some(hz) = qcs.iter().map(|q| q.setup.user_hz).find(|&h| h != 100) {
        d.push(format!(
            "/proc ticks are {} ms (USER_HZ={hz}), not 10 ms",
            1000 / hz.max(1)
        ));
    }
    d.push("QE10 and QC2 judge a QE against the spread of the other QEs of its Q@C".into());
    d
}

/// Sec. 9 (2)/(6): when ttp — and so the query it starts — could use fewer
/// CPUs than the overall /proc/stat counters sum over (`cores`, the online
/// CPUs), by its affinity mask or a cgroup's CPU quota, say so: those
/// counters (eq. 1's overall IOWait, QE6, QE9) still cover every online CPU
/// (docs/ttpv2.md, "Which CPU count").
pub(crate) fn cpu_restrictions(m: &MachineFacts) -> Vec<String> {
    let mut d = Vec::new();
    let online = m
        .cores
        .map(|c| format!(" of the {c} online CPUs"))
        .unwrap_or_default();
    if let Some(list) = &m.affinity_cpus {
        let cpus: Vec<String> = list.iter().map(u32::to_string).collect();
        d.push(format!(
            "ttp and the query it started were pinned to CPU{} {} ({}{online}, by their affinity mask); the overall /proc/stat counters still sum over every online CPU",
            if list.len() == 1 { "" } else { "s" },
            cpus.join(","),
            list.len()
        ));
    }
    if let Some(l) = &m.cgroup_cpu_limit {
        d.push(format!(
            "ttp and the query it started ran in cgroup {}, whose CPU quota limits them to {} CPUs' worth of time ({} µs per {} µs){online}; the overall /proc/stat counters still sum over every online CPU",
            l.cgroup,
            sig2(l.cpus()),
            l.quota_us,
            l.period_us
        ));
    }
    d
}

/// What measuring cost the measured: the ledger probes' CPU time per QE
/// against its Time_meas, from the kernel's BPF statistics (probe/cost.rs).
/// Sec. 9 asks for the tool that measured; its cost belongs beside it.
fn probe_cost_sentence(qcs: &[QcInput]) -> Option<String> {
    let costs: Vec<&ttp_ledger::probe::cost::ProbeCost> = qcs
        .iter()
        .flat_map(|q| &q.qes)
        .filter_map(|r| r.probe_cost.as_ref())
        .collect();
    if costs.is_empty() {
        return None;
    }
    let mut shares: Vec<f64> = costs.iter().map(|c| c.share_of_window * 100.0).collect();
    shares.sort_by(f64::total_cmp);
    let n = shares.len();
    let median = if n % 2 == 1 {
        shares[n / 2]
    } else {
        (shares[n / 2 - 1] + shares[n / 2]) / 2.0
    };
    let (runs, ns) = costs
        .iter()
        .filter_map(|c| c.program("sched_switch"))
        .fold((0u64, 0u64), |(r, t), p| {
            (r.saturating_add(p.runs), t.saturating_add(p.run_time_ns))
        });
    let per_switch = if runs > 0 {
        format!("; {} ns per context switch", sig2(ns as f64 / runs as f64))
    } else {
        String::new()
    };
    let missed: u64 = costs
        .iter()
        .fold(0u64, |a, c| a.saturating_add(c.lost_events()));
    let missed = if missed > 0 {
        format!("; {missed} events never reached the probes")
    } else {
        String::new()
    };
    Some(format!(
        " By the kernel's BPF statistics, the ledger's probes used a median of {}% of Time_meas in CPU time per execution (at most {}%{per_switch}{missed}).",
        sig2(median),
        sig2(shares[n - 1])
    ))
}

/// The two paragraphs of Sec. 9.
pub fn paragraph(p: &ParagraphInput) -> String {
    let m = p.machine;
    let get = |f: fn(&MachineFacts) -> Option<String>| m.and_then(f);
    // (1) protocol, (2) hardware, (3) operating system.
    let mut s = String::from(
        "The measurements were collected using Tucson Timing Protocol Version 2 (TTPv2) [Currim, Snodgrass, Suh, Zhang, ACM TODS 2016]",
    );
    if let Some(tool) = get(|m| m.tool.clone()) {
        s += &format!(" as implemented by {tool}");
    }
    let mut hw = Vec::new();
    if let Some(cpu) = get(|m| m.cpu_model.clone()) {
        let cores = m
            .and_then(|m| m.cores)
            .map(|c| format!(" ({c} cores)"))
            .unwrap_or_default();
        hw.push(format!("an {cpu}{cores}"));
    }
    if let Some(mem) = m.and_then(|m| m.memory_bytes) {
        hw.push(format!(
            "{:.1} GiB of memory",
            mem as f64 / (1u64 << 30) as f64
        ));
    }
    if let Some(disk) = get(|m| m.disk.clone()) {
        hw.push(format!("disk {disk}"));
    }
    if hw.is_empty() {
        s += " (the hardware was not recorded)";
    } else {
        s += &format!(" on {}", hw.join(", "));
    }
    match (get(|m| m.os.clone()), get(|m| m.kernel.clone())) {
        (Some(os), Some(k)) => s += &format!(", running {os} with the {k} kernel"),
        (Some(os), None) => s += &format!(", running {os}"),
        (None, Some(k)) => s += &format!(", running Linux {k}"),
        (None, None) => {}
    }
    // (4) QEs per Q@C, (5) computed measures and units.
    let mut per: Vec<usize> = p
        .qcs
        .iter()
        .map(|q| q.setup.qes_requested.map_or(q.qes.len(), |r| r as usize))
        .collect();
    per.sort();
    per.dedup();
    let times = match per.as_slice() {
        [n] => format!("{n} times"),
        _ => format!(
            "{} times",
            per.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    };
    let cache = match m.and_then(|m| m.cold_cache) {
        Some(true) if cold_cache_shortfalls(p.qcs).is_empty() => " with a cold cache",
        Some(true) => " with the page cache dropped before each QE",
        Some(false) => " with a warm cache",
        None => "",
    };
    s += &format!(
        ". The protocol executed the query {times} at each cardinality{cache} ({} Q@C{}) and provided calculated query evaluation time, including computation and I/O time, in msec, as the median over the retained executions",
        p.qcs.len(),
        if p.qcs.len() == 1 { "" } else { "s" }
    );
    if p.exact_reported {
        s += ", reported beside the exact on-CPU plus own-I/O time measured by an in-kernel eBPF ledger";
    }
    s += ".";
    if let Some(cost) = probe_cost_sentence(p.qcs) {
        s += &cost;
    }
    // (6) deviations.
    let dev = deviations(m, p.qcs);
    if dev.is_empty() {
        s += " The protocol was utilized exactly as specified.";
    } else {
        s += &format!(" Deviations from the protocol: {}.", dev.join("; "));
    }

    // (7) experiment-wide checks.
    s += "\n\n";
    let x: Vec<&CheckResult> = p
        .checks
        .iter()
        .filter(|c| c.scope == Scope::Experiment)
        .collect();
    let violated: Vec<String> = x
        .iter()
        .filter(|c| c.violated())
        .map(|c| {
            format!(
                "{} ({}: {})",
                c.id,
                c.name.trim_start_matches("Number of "),
                c.violations.unwrap_or(0)
            )
        })
        .collect();
    let na: Vec<&str> = x
        .iter()
        .filter(|c| c.is_na())
        .map(|c| c.id.as_str())
        .collect();
    if !x.is_empty() && na.len() == x.len() {
        s += "The experiment-wide sanity checks could not be applied to this data";
    } else if violated.is_empty() {
        s += "No runs violated the experiment-wide sanity checks";
    } else {
        s += &format!(
            "The experiment-wide sanity checks found violations: {}",
            violated.join(", ")
        );
    }
    if !na.is_empty() && na.len() < x.len() {
        s += &format!(" ({} could not be applied to this data)", na.join(", "));
    }
    // (8) QEs and Q@Cs dropped.
    s += &format!(
        ". Approximately {}% of the query executions and {}% of the queries-at-cardinality (Q@Cs) were dropped due to query execution and Q@C sanity checks.",
        pct(p.qes_dropped, p.qes_total),
        pct(p.qcs_dropped, p.qcs.len())
    );
    // (9) the first three post checks.
    let post = |id: &str| p.checks.iter().find(|c| c.id == id);
    match post("POST1").and_then(|c| c.percent) {
        Some(v) => {
            s += &format!(
                " As a result, excessive variation in calculated query time was observed in {}% of the Q@Cs.",
                sig2(v)
            )
        }
        None => s += " No Q@C was retained, so the post checks could not be applied.",
    }
    match (
        post("POST3").and_then(|c| c.percent),
        post("POST2").and_then(|c| c.percent),
    ) {
        (Some(r), Some(st)) => {
            s += &format!(
                " A total of {}% of the Q@Cs violated relaxed monotonicity and {}% violated strict monotonicity (of the Q@Cs compared with the next higher cardinality of their query, as Table XII counts them; relaxed: the lower cardinality still took longer after each Q@C's time was moved by half its own standard deviation toward the other's; App. E QC (4) does not say whose standard deviation, so this reading is ttp's own).",
                sig2(r),
                sig2(st)
            )
        }
        _ => {
            s += " Monotonicity was not examined: the retained Q@Cs do not cover two cardinalities of one query."
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::clean_qc;

    /// Catches rounding to a fixed number of decimals instead of two
    /// significant digits (Sec. 9 (8)).
    #[test]
    fn two_significant_digits() {
        assert_eq!(sig2(7.18), "7.2");
        assert_eq!(sig2(0.253), "0.25");
        assert_eq!(sig2(4.0), "4.0");
        assert_eq!(sig2(25.0), "25");
        assert_eq!(sig2(9.96), "10");
        assert_eq!(sig2(100.0), "100");
        assert_eq!(sig2(0.0), "0");
    }

    /// `taskset -c 0` on 2 CPUs: 2 online CPUs, pinned to CPU 0; a cgroup
    /// quota of half a CPU. Catches a pinned run reported as unrestricted,
    /// or an unrestricted one as pinned.
    #[test]
    fn pinning_and_cgroup_limits_are_stated() {
        use ttp_ledger::collect::machine::CgroupCpuLimit;
        let free = MachineFacts {
            cores: Some(2),
            ..MachineFacts::default()
        };
        assert!(cpu_restrictions(&free).is_empty());
        let pinned = MachineFacts {
            affinity_cpus: Some(vec![0]),
            cgroup_cpu_limit: Some(CgroupCpuLimit {
                cgroup: "/limited".into(),
                quota_us: 50_000,
                period_us: 100_000,
            }),
            ..free
        };
        let d = deviations(Some(&pinned), &[]).join("\n");
        for needle in [
            "2 CPU cores were enabled",
            "eq. 1 halves, and QE9 compares, the IOWait summed over all 2 CPUs, unscaled",
            "pinned to CPU 0 (1 of the 2 online CPUs, by their affinity mask)",
            "cgroup /limited, whose CPU quota limits them to 0.50 CPUs' worth of time (50000 µs per 100000 µs) of the 2 online CPUs",
        ] {
            assert!(d.contains(needle), "missing {needle:?} in:\n{d}");
        }
        assert!(!d.contains("iowait_share_ns"), "no ledger share given: {d}");
        // With the query's ledger share of IOWait measured, the paragraph
        // says Time_calc from it is reported beside eq. 1's.
        let mut qc = crate::testutil::clean_qc(3);
        for p in qc.qes.iter_mut().flat_map(|q| &mut q.processes) {
            if p.class == ttp_window::window::record::ProcessClass::Query {
                p.m.ledger.iowait_share_ns = Some(1_000_000);
            }
        }
        let d = deviations(Some(&pinned), &[qc]).join("\n");
        assert!(
            d.contains("(the ledger's iowait_share_ns) in place of the half is reported beside it"),
            "{d}"
        );
    }

    /// The paragraph states the machine, the counts and the deviations it
    /// was given. Catches a dropped sentence or a wrong percentage.
    #[test]
    fn paragraph_mentions_every_piece() {
        let machine = MachineFacts {
            tool: Some("ttp-ebpf 0.1.0".into()),
            cpu_model: Some("AMD EPYC 7B13".into()),
            cores: Some(2),
            memory_bytes: Some(4 << 30),
            disk: Some("virtio vda".into()),
            os: Some("Debian GNU/Linux 13".into()),
            kernel: Some("6.18.0".into()),
            config_hz: Some(250),
            user_hz: Some(100),
            virtualization: Some("kvm".into()),
            delay_accounting_switched_on: true,
            cold_cache: Some(true),
            deviations: vec!["sshd left running".into()],
            ..MachineFacts::default()
        };
        let mut qcs = vec![clean_qc(10)];
        for qe in &mut qcs[0].qes {
            qe.cold_cache = Some(full_cold_step());
        }
        // The probes' cost of QEs 1–3: 0.2 %, 0.4 % and 0.3 % of a 1 s
        // Time_meas, 95 ns a switch.
        for (qe, switches) in qcs[0].qes.iter_mut().zip([21_053u64, 42_105, 31_579]) {
            use ttp_ledger::probe::cost::{CostSnapshot, ProbeCost, ProgramSnapshot, Sampled};
            // One sampling window inside, at 95 ns a run.
            let at = |at_ns, n: u64, windows: u64| CostSnapshot {
                at_ns,
                programs: vec![(
                    "sched_switch".into(),
                    ProgramSnapshot {
                        runs: n,
                        counted: true,
                        sampled: Sampled {
                            runs: 100 * windows,
                            run_time_ns: 9_500 * windows,
                            windows,
                            mean_sum: 95.0 * windows as f64,
                            mean_sq_sum: 9_025.0 * windows as f64,
                            runs_scaled: 0.0,
                        },
                        ..ProgramSnapshot::default()
                    },
                )],
                windows,
                stats_on_ns: 0,
            };
            qe.probe_cost = Some(ProbeCost::between(
                &at(0, 0, 0),
                &at(1_000_000_000, switches, 1),
            ));
        }
        let text = paragraph(&ParagraphInput {
            machine: Some(&machine),
            qcs: &qcs,
            checks: &[],
            qes_total: 10,
            qes_dropped: 1,
            qcs_dropped: 0,
            exact_reported: true,
        });
        for needle in [
            "TTPv2",
            "AMD EPYC 7B13 (2 cores)",
            "4.0 GiB",
            "Debian GNU/Linux 13 with the 6.18.0 kernel",
            "10 times",
            "cold cache",
            "2 CPU cores",
            "kvm",
            "CONFIG_HZ=250",
            "task_delayacct",
            "sshd left running",
            "10% of the query executions and 0% of the queries-at-cardinality",
            "ledger's probes used a median of 0.30% of Time_meas in CPU time per execution (at most 0.40%; 95 ns per context switch)",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
    }

    /// The Sec. 3.1 procedure as `run --cold-cache` records it when all of
    /// it was done: 64 MiB read with O_DIRECT, the drop, a 1 MiB re-read
    /// that reached the device.
    fn full_cold_step() -> ttp_window::window::cold_cache::ColdCacheStep {
        ttp_window::window::cold_cache::ColdCacheStep {
            fill_start_unix_ns: Some(1),
            fill_bytes: 64 << 20,
            fill_skipped: None,
            drop_unix_ns: 2,
            check_file_bytes: 1 << 20,
            check_device_bytes: Some(1 << 20),
        }
    }

    /// "With a cold cache" only when the whole Sec. 3.1 procedure ran and
    /// the drop was shown to work before every QE; otherwise the paragraph
    /// says the page cache was dropped and names what was skipped or
    /// failed. Catches the claim made for a skipped fill, a drop that did
    /// not reach the device, or a file that predates the record.
    #[test]
    fn cold_cache_claimed_only_for_the_full_procedure() {
        let machine = MachineFacts {
            cold_cache: Some(true),
            ..MachineFacts::default()
        };
        let text = |qcs: &[QcInput]| {
            paragraph(&ParagraphInput {
                machine: Some(&machine),
                qcs,
                checks: &[],
                qes_total: 6,
                qes_dropped: 0,
                qcs_dropped: 0,
                exact_reported: false,
            })
        };
        let mut qc = clean_qc(6);
        for qe in &mut qc.qes {
            qe.cold_cache = Some(full_cold_step());
        }
        let t = text(std::slice::from_ref(&qc));
        assert!(t.contains("with a cold cache"), "{t}");
        assert!(cold_cache_shortfalls(std::slice::from_ref(&qc)).is_empty());
        let step = qc.qes[1].cold_cache.as_mut().unwrap();
        step.fill_skipped = Some("reading /var/tmp/x with O_DIRECT failed: EINVAL".into());
        step.fill_bytes = 0;
        qc.qes[2].cold_cache.as_mut().unwrap().check_device_bytes = Some(4096);
        qc.qes[3].cold_cache = None;
        let t = text(std::slice::from_ref(&qc));
        assert!(!t.contains("with a cold cache"), "{t}");
        for needle in [
            "with the page cache dropped before each QE",
            "fill (Sec. 3.1: 64 MB of unrelated data) was skipped or cut short before 1 QE(s): reading /var/tmp/x with O_DIRECT failed: EINVAL",
            "did not reach the device before 1 QE(s)",
            "not recorded for 1 of 6 QEs",
        ] {
            assert!(t.contains(needle), "missing {needle:?} in:\n{t}");
        }
    }

    /// The hypervisor as collect/machine.rs words it is named once: "the
    /// machine is a virtual machine (kvm)", as is a bare name from an
    /// older file. Catches "virtual machine (virtual machine (…))".
    #[test]
    fn a_virtual_machine_is_named_once() {
        for v in ["virtual machine (kvm)", "kvm"] {
            let m = MachineFacts {
                virtualization: Some(v.into()),
                ..Default::default()
            };
            let d = deviations(Some(&m), &[]);
            assert!(
                d.contains(
                    &"the machine is a virtual machine (kvm), so steal time may occur".into()
                ),
                "{d:?}"
            );
        }
    }
}
