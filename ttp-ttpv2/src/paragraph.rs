//! The reporting paragraph of Sec. 9: the nine pieces of information a
//! paper using TTPv2 states, as the facts and figures filled in from the
//! machine and the results ([`Paragraph`]). The protocol says what is
//! stated; ttp-user's `report/ttpv2/paragraph.rs` words it, and that text
//! is the `paragraph` of the run and analyze JSON.

use serde::{Deserialize, Serialize};

use super::checks::{CheckResult, Scope};
use super::model::QcInput;
use super::paragraph_deviations::{
    ColdCacheShortfall, SetupItem, cold_cache_shortfalls, query_tree, setup_check_items,
    steal_measured,
};

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

/// How the reporting paragraph is worded from its facts: ttp-user's report
/// layer passes its wording to [`super::analysis::analyse`].
pub type Wording = fn(&Paragraph) -> String;

/// The facts and figures of Sec. 9's paragraph, in its order: (1) the
/// protocol and the tool, (2) the hardware, (3) the operating system, (4)
/// the QEs per Q@C and the cache, (5) what was computed, (6) the
/// deviations, (7) the experiment-wide checks, (8) what was dropped, (9)
/// the first three post checks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Paragraph {
    /// (1) The tool that measured ("ttp-ebpf 0.1.0").
    pub tool: Option<String>,
    /// (2)
    pub cpu_model: Option<String>,
    pub cores: Option<u32>,
    pub memory_bytes: Option<u64>,
    pub disk: Option<String>,
    /// (3)
    pub os: Option<String>,
    pub kernel: Option<String>,
    /// (4) The QEs of each Q@C (requested, else measured): each number
    /// once, ascending.
    pub qes_per_qc: Vec<usize>,
    pub cache: Option<Cache>,
    pub qcs: usize,
    /// (5) The ledger's exact time was reported beside Time_calc.
    pub exact_reported: bool,
    /// What measuring cost the measured (Sec. 9 asks for the tool that
    /// measured; its cost belongs beside it).
    pub probe_cost: Option<ProbeCostFigures>,
    /// (6) Empty when the protocol was used exactly as specified.
    pub deviations: Vec<Deviation>,
    /// (7)
    pub experiment_checks: ExperimentChecks,
    /// (8)
    pub qes_total: usize,
    pub qes_dropped: usize,
    pub qcs_dropped: usize,
    /// (9) POST1: the percentage of Q@Cs with excessive variation; `None`
    /// when no Q@C was retained.
    pub excessive_variation_percent: Option<f64>,
    /// POST3 and POST2: the percentages of Q@Cs that violated relaxed and
    /// strict monotonicity; `None` when they were not examined.
    pub monotonicity_percent: Option<Monotonicity>,
}

/// The page cache before each QE (Sec. 3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cache {
    /// The whole cold-cache procedure ran and the drop was shown to work
    /// before every QE.
    Cold,
    /// The page cache was dropped, but part of the procedure was skipped or
    /// not shown to work (the deviations say what).
    Dropped,
    Warm,
}

/// The ledger probes' CPU time per QE against its Time_meas, from the
/// kernel's BPF statistics (probe/cost.rs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeCostFigures {
    pub median_percent: f64,
    pub max_percent: f64,
    /// `None` when the switch program's runs were not counted.
    pub ns_per_switch: Option<f64>,
    pub events_missed: u64,
}

/// The experiment-wide sanity checks (scope X).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExperimentChecks {
    /// How many there are.
    pub total: usize,
    /// (id, name, violations) of each violated one.
    pub violated: Vec<(String, String, u64)>,
    /// The ids of those that could not be applied to this data.
    pub not_applicable: Vec<String>,
}

/// Relaxed (POST3) and strict (POST2) monotonicity violations, in %.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Monotonicity {
    pub relaxed: f64,
    pub strict: f64,
}

/// A deviation from the protocol as specified (Sec. 8.1 Step 0, Sec. 9
/// (6)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Deviation {
    /// More than one CPU core enabled: overall ticks summed over them.
    Cores {
        cores: u32,
    },
    /// Eq. 1 and QE9 take the overall IOWait unscaled (docs/ttpv2.md, "More
    /// than one CPU"); `share_known`: the ledger's share of it was measured
    /// and Time_calc from it is reported beside (calc.rs).
    IowaitUnscaled {
        cores: u32,
        share_known: bool,
    },
    /// ttp and the query pinned by their affinity mask.
    Pinned {
        cpus: Vec<u32>,
        online: Option<u32>,
    },
    /// A cgroup's CPU quota.
    CgroupQuota {
        cgroup: String,
        cpus: f64,
        quota_us: u64,
        period_us: u64,
        online: Option<u32>,
    },
    /// A virtual machine, as `collect/machine.rs` names it (older files
    /// hold the bare hypervisor name).
    VirtualMachine {
        hypervisor: String,
    },
    /// QEs with steal time, QEs with it measured, steal ticks summed.
    Steal {
        qes: usize,
        of: usize,
        ticks: u64,
    },
    /// The Step 0 check snapshot: the items that did not pass.
    SetupCheck {
        items: Vec<SetupItem>,
    },
    /// CPU time accounted at CONFIG_HZ and reported in USER_HZ ticks.
    ClockRates {
        config_hz: u32,
        user_hz: u32,
    },
    DelayAccountingSwitchedOn,
    WarmCache,
    /// Part of the cold-cache procedure not done or not shown to work.
    ColdCache(ColdCacheShortfall),
    /// The query is the command's whole process tree (Sec. 7.2): at most
    /// `most` processes in one QE.
    QueryTree {
        most: usize,
    },
    /// Warm-up executions before each query's first QE.
    Warmups {
        n: usize,
    },
    /// USER_HZ other than 100.
    UserHz {
        hz: u32,
    },
    /// QE10 and QC2 judge a QE against the spread of its Q@C's others.
    Qe10Spread,
    /// A statement given as it is: the machine's own deviations, and the
    /// self-recovery of a Q@C (recovery.rs).
    Stated {
        text: String,
    },
}

/// Deviations from the protocol as specified (Sec. 8.1 Step 0, Sec. 9 (6)).
pub fn deviations(machine: Option<&MachineFacts>, qcs: &[QcInput]) -> Vec<Deviation> {
    let mut d = Vec::new();
    let cpus = machine
        .and_then(|m| m.cores)
        .or_else(|| qcs.iter().map(|q| q.setup.cpus).max());
    if let Some(c) = cpus.filter(|&c| c > 1) {
        d.push(Deviation::Cores { cores: c });
        // The ledger's share of the overall IOWait is the measured
        // alternative to eq. 1's 0.5 (calc.rs, others_fraction_measured).
        let share_known = qcs.iter().flat_map(|q| &q.qes).any(|qe| {
            qe.processes.iter().any(|p| {
                p.class == ttp_window::window::record::ProcessClass::Query
                    && p.m.ledger.iowait_share_ns.is_some()
            })
        });
        d.push(Deviation::IowaitUnscaled {
            cores: c,
            share_known,
        });
    }
    if let Some(m) = machine {
        d.extend(cpu_restrictions(m));
        if let Some(v) = &m.virtualization {
            d.push(Deviation::VirtualMachine {
                hypervisor: v.clone(),
            });
        }
        if m.virtualization.is_some() || steal_measured(qcs).is_some_and(|(n, _, _)| n > 0) {
            d.extend(
                steal_measured(qcs).map(|(qes, of, ticks)| Deviation::Steal { qes, of, ticks }),
            );
        }
        d.extend(setup_check_items(m).map(|items| Deviation::SetupCheck { items }));
        if let (Some(h), Some(u)) = (m.config_hz, m.user_hz)
            && h != u
        {
            d.push(Deviation::ClockRates {
                config_hz: h,
                user_hz: u,
            });
        }
        if m.delay_accounting_switched_on {
            d.push(Deviation::DelayAccountingSwitchedOn);
        }
        if m.cold_cache == Some(false) {
            d.push(Deviation::WarmCache);
        }
        if m.cold_cache == Some(true) {
            d.extend(
                cold_cache_shortfalls(qcs)
                    .into_iter()
                    .map(Deviation::ColdCache),
            );
        }
        d.extend(
            m.deviations
                .iter()
                .map(|t| Deviation::Stated { text: t.clone() }),
        );
    }
    d.extend(query_tree(qcs).map(|most| Deviation::QueryTree { most }));
    if let Some(n) = qcs
        .iter()
        .map(|q| q.setup.warmup.len())
        .max()
        .filter(|&n| n > 0)
    {
        d.push(Deviation::Warmups { n });
    }
    d.extend(qcs.iter().filter_map(|q| {
        let name = (qcs.len() > 1).then(|| q.name());
        q.setup
            .recovery
            .statement(name.as_deref())
            .map(|text| Deviation::Stated { text })
    }));
    if let Some(hz) = qcs.iter().map(|q| q.setup.user_hz).find(|&h| h != 100) {
        d.push(Deviation::UserHz { hz });
    }
    d.push(Deviation::Qe10Spread);
    d
}

/// Sec. 9 (2)/(6): when ttp — and so the query it starts — could use fewer
/// CPUs than the overall /proc/stat counters sum over (`cores`, the online
/// CPUs), by its affinity mask or a cgroup's CPU quota (docs/ttpv2.md,
/// "Which CPU count").
pub fn cpu_restrictions(m: &MachineFacts) -> Vec<Deviation> {
    let mut d = Vec::new();
    if let Some(list) = &m.affinity_cpus {
        d.push(Deviation::Pinned {
            cpus: list.clone(),
            online: m.cores,
        });
    }
    if let Some(l) = &m.cgroup_cpu_limit {
        d.push(Deviation::CgroupQuota {
            cgroup: l.cgroup.clone(),
            cpus: l.cpus(),
            quota_us: l.quota_us,
            period_us: l.period_us,
            online: m.cores,
        });
    }
    d
}

/// What measuring cost the measured: the ledger probes' CPU time per QE
/// against its Time_meas, from the kernel's BPF statistics (probe/cost.rs).
fn probe_cost(qcs: &[QcInput]) -> Option<ProbeCostFigures> {
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
    Some(ProbeCostFigures {
        median_percent: median,
        max_percent: shares[n - 1],
        ns_per_switch: (runs > 0).then(|| ns as f64 / runs as f64),
        events_missed: costs
            .iter()
            .fold(0u64, |a, c| a.saturating_add(c.lost_events())),
    })
}

impl Paragraph {
    /// The facts of Sec. 9's paragraph.
    pub fn of(p: &ParagraphInput) -> Paragraph {
        let m = p.machine;
        let get = |f: fn(&MachineFacts) -> Option<String>| m.and_then(f);
        let mut qes_per_qc: Vec<usize> = p
            .qcs
            .iter()
            .map(|q| q.setup.qes_requested.map_or(q.qes.len(), |r| r as usize))
            .collect();
        qes_per_qc.sort();
        qes_per_qc.dedup();
        let cache = m.and_then(|m| m.cold_cache).map(|cold| match cold {
            true if cold_cache_shortfalls(p.qcs).is_empty() => Cache::Cold,
            true => Cache::Dropped,
            false => Cache::Warm,
        });
        let x: Vec<&CheckResult> = p
            .checks
            .iter()
            .filter(|c| c.scope == Scope::Experiment)
            .collect();
        let experiment_checks = ExperimentChecks {
            total: x.len(),
            violated: x
                .iter()
                .filter(|c| c.violated())
                .map(|c| (c.id.clone(), c.name.clone(), c.violations.unwrap_or(0)))
                .collect(),
            not_applicable: x
                .iter()
                .filter(|c| c.is_na())
                .map(|c| c.id.clone())
                .collect(),
        };
        let post = |id: &str| p.checks.iter().find(|c| c.id == id).and_then(|c| c.percent);
        Paragraph {
            tool: get(|m| m.tool.clone()),
            cpu_model: get(|m| m.cpu_model.clone()),
            cores: m.and_then(|m| m.cores),
            memory_bytes: m.and_then(|m| m.memory_bytes),
            disk: get(|m| m.disk.clone()),
            os: get(|m| m.os.clone()),
            kernel: get(|m| m.kernel.clone()),
            qes_per_qc,
            cache,
            qcs: p.qcs.len(),
            exact_reported: p.exact_reported,
            probe_cost: probe_cost(p.qcs),
            deviations: deviations(m, p.qcs),
            experiment_checks,
            qes_total: p.qes_total,
            qes_dropped: p.qes_dropped,
            qcs_dropped: p.qcs_dropped,
            excessive_variation_percent: post("POST1"),
            monotonicity_percent: post("POST3")
                .zip(post("POST2"))
                .map(|(relaxed, strict)| Monotonicity { relaxed, strict }),
        }
    }
}
