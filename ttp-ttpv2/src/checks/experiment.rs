//! Experiment-wide sanity checks X1–X8 (Table X, App. E): not a single
//! violation should occur. They flag the run for scrutiny; they drop nothing
//! (Sec. 8.2).
use std::collections::BTreeSet;

use super::{CheckResult, Verdict, aggregate};
use crate::calc::QeCalc;
use crate::model::QcInput;
use ttp_window::window::record::{Measures, ProcessClass, ProcessDetail, QeRecord};

/// Server (query) process names of DBMSes, as `comm` shows them (15 bytes).
const DBMS_SERVERS: &[&str] = &[
    "mysqld",
    "mariadbd",
    "postgres",
    "postmaster",
    "db2sysc",
    "oracle",
    "sqlservr",
    "mongod",
    "clickhouse-serv",
    "monetdbd",
    "mserver5",
];

/// Helper (utility) processes of DBMSes: exact names or `prefix*`.
const DBMS_HELPERS: &[&str] = &[
    "mysqld_safe",
    "db2fmp",
    "db2acd",
    "db2sysc*",
    "db2ckpwd",
    "db2vend",
    "db2wdog",
    "ora_*",
    "tnslsnr",
    "pg_ctl",
    "mongos",
];

fn matches(pattern: &str, comm: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => comm.starts_with(prefix) && comm != prefix,
        None => comm == pattern,
    }
}

/// Every experiment-wide check over all Q@Cs.
pub(crate) fn experiment_checks(qcs: &[QcInput], calcs: &[Vec<QeCalc>]) -> Vec<CheckResult> {
    vec![
        x1_missing(qcs),
        x2_unique_plan(qcs),
        x3(qcs, calcs),
        per_qe("X4", qcs, calcs, x4_derived),
        per_qe("X5", qcs, calcs, |qe, _, _| match qe.overall.steal_ticks {
            // App. E (5): non-zero steal time.
            Some(s) => Verdict::from_bool(s > 0),
            None => Verdict::na("steal ticks not measured"),
        }),
        per_qe("X6", qcs, calcs, x6_guest),
        per_qe("X7", qcs, calcs, |qe, _, qc| {
            other_dbms(qe, qc, DBMS_SERVERS)
        }),
        per_qe("X8", qcs, calcs, |qe, _, qc| {
            other_dbms(qe, qc, DBMS_HELPERS)
        }),
    ]
}

fn qe_name(qc: &QcInput, qe: &QeRecord, several: bool) -> String {
    if several {
        format!("{} qe {}", qc.name(), qe.qe)
    } else {
        format!("qe {}", qe.qe)
    }
}

fn per_qe(
    id: &str,
    qcs: &[QcInput],
    calcs: &[Vec<QeCalc>],
    f: impl Fn(&QeRecord, &QeCalc, &QcInput) -> Verdict,
) -> CheckResult {
    let several = qcs.len() > 1;
    let mut items = Vec::new();
    for (qc, cs) in qcs.iter().zip(calcs) {
        for (qe, c) in qc.qes.iter().zip(cs) {
            items.push((qe_name(qc, qe, several), f(qe, c, qc)));
        }
    }
    aggregate(id, items.iter().map(|(n, v)| (n.clone(), v)))
}

/// App. E (1): queries not executed, for whatever reason: QEs asked for but
/// not recorded, commands that could not start, failed or were killed.
fn x1_missing(qcs: &[QcInput]) -> CheckResult {
    let several = qcs.len() > 1;
    let (mut missing, mut expected, mut offenders) = (0u64, 0u64, Vec::new());
    let mut knows = false;
    for qc in qcs {
        let recorded = qc.qes.len() as u64;
        let requested = qc.setup.qes_requested.map(u64::from);
        knows |= requested.is_some();
        for qe in &qc.qes {
            knows |= qe.exit_code.is_some() || qe.spawn_error.is_some() || qe.signal.is_some();
            if qe.missing() {
                missing += 1;
                offenders.push(qe_name(qc, qe, several));
            }
        }
        let absent = requested.map_or(0, |r| r.saturating_sub(recorded));
        if absent > 0 {
            missing += absent;
            offenders.push(format!("{}: {absent} QE(s) not recorded", qc.name()));
        }
        expected += requested.map_or(recorded, |r| r.max(recorded));
    }
    if !knows {
        return CheckResult::na(
            "X1",
            "the data records neither how many QEs were asked for nor how each ended",
        );
    }
    CheckResult::counted("X1", missing, expected, offenders)
}

/// App. E (2): Q@Cs whose QEs showed more than one query plan.
fn x2_unique_plan(qcs: &[QcInput]) -> CheckResult {
    let mut items = Vec::new();
    for qc in qcs {
        let plans: BTreeSet<&str> = qc.qes.iter().filter_map(|q| q.plan.as_deref()).collect();
        let v = if plans.is_empty() {
            Verdict::na("no query plan recorded (run with --plan-cmd)")
        } else {
            Verdict::from_bool(plans.len() > 1)
        };
        items.push((qc.name(), v));
    }
    aggregate("X2", items.iter().map(|(n, v)| (n.clone(), v)))
}

/// The per-process measures of Sec. 3.5 each process must carry (App. E
/// (3)), by name. U, S and BlockIO are what eq. 1–2 need; the switch counts
/// and the read/write system calls complete the seven per-type measures of
/// the causal model (Sec. 5.1, Fig. 3); the faults complete Sec. 3.5.
/// Reads one measure of a process.
type Get = fn(&Measures) -> Option<u64>;

const PROCESS_MEASURES: &[(&str, Get)] = &[
    ("U", |m| m.u_ticks),
    ("S", |m| m.s_ticks),
    ("BlockIO", |m| m.blkio_ticks),
    ("vol_cs", |m| m.vol_cs),
    ("invol_cs", |m| m.invol_cs),
    ("read_syscalls", |m| m.read_syscalls),
    ("write_syscalls", |m| m.write_syscalls),
    ("minflt", |m| m.minflt),
    ("majflt", |m| m.majflt),
];

/// Guest and children's guest time (Sec. 3.5 (e), (f)): /proc/PID/stat
/// only. A process read only through its exit records (taskstats carries no
/// guest time) cannot have them, so they are required of processes still
/// readable in the after-image.
const GUEST_MEASURES: &[(&str, Get)] =
    &[("guest", |m| m.guest_ticks), ("cguest", |m| m.cguest_ticks)];

/// Whether `f` is known for some process of some QE: a measure no process
/// of the data has was not recorded at all (a file written before ttp
/// recorded it), which X3 notes instead of counting against every QE.
fn recorded(qcs: &[QcInput], f: Get) -> bool {
    qcs.iter()
        .flat_map(|qc| &qc.qes)
        .flat_map(|qe| &qe.processes)
        .any(|p| f(&p.m).is_some())
}

/// App. E (3): a process or the overall image lacks an expected measure
/// (Sec. 3.5–3.6): every per-process measure of Sec. 3.5 of every process
/// (guest and cguest of those not seen only through exit records), and the
/// overall tick counters. U, S and BlockIO are always required; a measure
/// the data never recorded is named in a note.
fn x3(qcs: &[QcInput], calcs: &[Vec<QeCalc>]) -> CheckResult {
    let required: Vec<(&str, Get, bool)> = PROCESS_MEASURES
        .iter()
        .map(|&(n, f)| (n, f, false))
        .chain(GUEST_MEASURES.iter().map(|&(n, f)| (n, f, true)))
        .filter(|&(n, f, _)| matches!(n, "U" | "S" | "BlockIO") || recorded(qcs, f))
        .collect();
    let not_recorded: Vec<&str> = PROCESS_MEASURES
        .iter()
        .chain(GUEST_MEASURES)
        .filter(|(n, _)| !required.iter().any(|r| r.0 == *n))
        .map(|(n, _)| *n)
        .collect();
    let result = per_qe("X3", qcs, calcs, |qe, _, _| x3_underlying(qe, &required));
    if result.violations.is_none() {
        return result;
    }
    // Which processes lacked what, so that a reader can tell an unreadable
    // file (e.g. another namespace's init, whose /proc/1/io even root may
    // not read) from a measurement that failed.
    let mut lacking: std::collections::BTreeMap<String, BTreeSet<&str>> = Default::default();
    for qe in qcs.iter().flat_map(|qc| &qc.qes) {
        if qe.detail == ProcessDetail::ClassTotals {
            continue;
        }
        for p in &qe.processes {
            for n in missing(p, &required) {
                let who = match p.pid {
                    Some(pid) => format!("{} (pid {pid})", p.comm),
                    None => p.comm.clone(),
                };
                lacking.entry(who).or_default().insert(n);
            }
        }
    }
    let mut notes: Vec<String> = result.note.clone().into_iter().collect();
    if !lacking.is_empty() {
        const SHOWN: usize = 5;
        let mut list: Vec<String> = lacking
            .iter()
            .take(SHOWN)
            .map(|(who, ms)| {
                format!(
                    "{who}: {}",
                    ms.iter().copied().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        if lacking.len() > SHOWN {
            list.push(format!("{} more processes", lacking.len() - SHOWN));
        }
        notes.push(format!("missing: {}", list.join("; ")));
    }
    if !not_recorded.is_empty() {
        notes.push(format!(
            "not recorded in this data, so not checked: {}",
            not_recorded.join(", ")
        ));
    }
    if notes.is_empty() {
        return result;
    }
    result.with_note(Some(notes.join("; ")))
}

type Required<'a> = [(&'a str, Get, bool)];

/// The names of the required measures process `p` lacks.
fn missing<'a>(
    p: &ttp_window::window::record::ProcessMeasures,
    required: &Required<'a>,
) -> Vec<&'a str> {
    // A process seen only through exit records: stopped, and no guest time.
    let exit_records_only = p.stopped && p.m.guest_ticks.is_none() && p.m.cguest_ticks.is_none();
    required
        .iter()
        .filter(|(_, _, guest)| !(*guest && exit_records_only))
        .filter(|(_, f, _)| f(&p.m).is_none())
        .map(|(n, _, _)| *n)
        .collect()
}

fn x3_underlying(qe: &QeRecord, required: &Required<'_>) -> Verdict {
    if qe.detail == ProcessDetail::ClassTotals {
        return Verdict::na(
            "external data gives only the columns it has; each check says what it lacks",
        );
    }
    let o = &qe.overall;
    let overall = [
        o.user_ticks,
        o.nice_ticks,
        o.system_ticks,
        o.idle_ticks,
        o.iowait_ticks,
        o.irq_ticks,
        o.softirq_ticks,
        o.steal_ticks,
        o.guest_ticks,
        o.guest_nice_ticks,
    ];
    let process_missing = qe
        .processes
        .iter()
        .any(|p| !missing(p, required).is_empty());
    Verdict::from_bool(process_missing || overall.iter().any(Option::is_none))
}

/// App. E (4): the derived overall measure (number of ephemeral processes)
/// is missing.
fn x4_derived(qe: &QeRecord, c: &QeCalc, _: &QcInput) -> Verdict {
    if qe.detail == ProcessDetail::ClassTotals && c.ephemeral_processes.is_none() {
        return Verdict::na("external data without an ephemeral column");
    }
    Verdict::from_bool(c.ephemeral_processes.is_none())
}

/// App. E (6): non-zero overall guest or guest-nice time, or more than one
/// process with non-zero guest or cguest time.
fn x6_guest(qe: &QeRecord, _: &QeCalc, _: &QcInput) -> Verdict {
    let o = &qe.overall;
    if o.guest_ticks.is_none() && o.guest_nice_ticks.is_none() {
        return Verdict::na("guest ticks not measured");
    }
    let overall = o.guest_ticks.unwrap_or(0) > 0 || o.guest_nice_ticks.unwrap_or(0) > 0;
    let guests = qe
        .processes
        .iter()
        .filter(|p| p.m.guest_ticks.unwrap_or(0) > 0 || p.m.cguest_ticks.unwrap_or(0) > 0)
        .count();
    Verdict::from_bool(overall || guests > 1)
}

/// App. E (7)/(8): a process of another DBMS runs (among the daemons: not a
/// query or utility process of the measured program).
fn other_dbms(qe: &QeRecord, qc: &QcInput, names: &[&str]) -> Verdict {
    if qe.detail == ProcessDetail::ClassTotals {
        return Verdict::na("external data has no process names");
    }
    let own: BTreeSet<&str> = qe
        .processes
        .iter()
        .filter(|p| matches!(p.class, ProcessClass::Query | ProcessClass::Utility))
        .map(|p| p.comm.as_str())
        .chain(qc.setup.query_process.as_deref())
        .chain(qc.setup.utilities.iter().map(String::as_str))
        .collect();
    Verdict::from_bool(
        qe.of_class(ProcessClass::Daemon)
            .any(|p| !own.contains(p.comm.as_str()) && names.iter().any(|n| matches(n, &p.comm))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calc::calc_qe;
    use crate::testutil::{clean_qc, proc_of};

    fn run(qcs: &[QcInput], id: &str) -> CheckResult {
        let calcs: Vec<Vec<QeCalc>> = qcs
            .iter()
            .map(|qc| qc.qes.iter().map(|q| calc_qe(q, &qc.setup)).collect())
            .collect();
        experiment_checks(qcs, &calcs)
            .into_iter()
            .find(|c| c.id == id)
            .unwrap()
    }

    /// Asserts `id` reports 0 on clean data and `n` after `spoil`.
    fn fires(id: &str, n: u64, spoil: impl FnOnce(&mut QcInput)) {
        let mut qc = clean_qc(6);
        assert_eq!(
            run(std::slice::from_ref(&qc), id).violations,
            Some(0),
            "{id} fired on clean data"
        );
        spoil(&mut qc);
        let r = run(std::slice::from_ref(&qc), id);
        assert_eq!(r.violations, Some(n), "{id}: {r:?}");
    }

    /// Catches X1 missing a failed command or the QEs an interrupted run
    /// never recorded.
    #[test]
    fn x1_missing_queries() {
        fires("X1", 3, |qc| {
            qc.qes[0].exit_code = Some(1);
            qc.qes[1].spawn_error = Some("No such file or directory".into());
            qc.setup.qes_requested = Some(7);
        });
    }

    #[test]
    fn x2_unique_plan() {
        let mut qc = clean_qc(6);
        assert!(
            run(std::slice::from_ref(&qc), "X2").is_na(),
            "no plans recorded is n/a"
        );
        for qe in &mut qc.qes {
            qe.plan = Some("Seq Scan".into());
        }
        assert_eq!(run(std::slice::from_ref(&qc), "X2").violations, Some(0));
        qc.qes[3].plan = Some("Index Scan".into());
        assert_eq!(run(std::slice::from_ref(&qc), "X2").violations, Some(1));
    }

    /// Catches X3 accepting a process without BlockIO (delay accounting off).
    #[test]
    fn x3_underlying_measures() {
        fires("X3", 2, |qc| {
            qc.qes[0].processes[1].m.blkio_ticks = None;
            qc.qes[4].overall.softirq_ticks = None;
        });
    }

    /// Catches X3 looking only at U, S and BlockIO: a process without its
    /// read system calls, major faults or (read from /proc) guest time is a
    /// violation; a process seen only through exit records needs no guest
    /// time.
    #[test]
    fn x3_every_process_measure() {
        fires("X3", 3, |qc| {
            qc.qes[0].processes[1].m.read_syscalls = None;
            qc.qes[1].processes[0].m.majflt = None;
            qc.qes[2].processes[0].m.cguest_ticks = None;
            let p = &mut qc.qes[3].processes[1];
            p.stopped = true;
            p.m.guest_ticks = None;
            p.m.cguest_ticks = None;
        });
    }

    /// Catches X3 failing every QE of a file recorded before the system
    /// calls were: a measure no process carries is noted, not violated.
    #[test]
    fn x3_measure_never_recorded_is_noted() {
        let mut qc = clean_qc(6);
        for p in qc.qes.iter_mut().flat_map(|q| &mut q.processes) {
            p.m.read_syscalls = None;
        }
        let r = run(std::slice::from_ref(&qc), "X3");
        assert_eq!(r.violations, Some(0));
        assert!(
            r.note.as_deref().unwrap().contains("read_syscalls"),
            "{r:?}"
        );
    }

    #[test]
    fn x4_derived_measures() {
        fires("X4", 1, |qc| qc.qes[2].process_sets = None);
    }

    #[test]
    fn x5_steal() {
        fires("X5", 1, |qc| qc.qes[2].overall.steal_ticks = Some(3));
    }

    /// One process with guest time is allowed, two are not (App. E (6)).
    #[test]
    fn x6_guest() {
        fires("X6", 2, |qc| {
            qc.qes[0].overall.guest_nice_ticks = Some(1);
            qc.qes[1].processes[0].m.guest_ticks = Some(4);
            qc.qes[2].processes[0].m.guest_ticks = Some(4);
            qc.qes[2].processes[1].m.cguest_ticks = Some(1);
        });
    }

    /// A postgres server among the daemons is another DBMS; the measured
    /// DBMS's own processes are not. Catches flagging the measured DBMS.
    #[test]
    fn x7_x8_other_dbms() {
        fires("X7", 1, |qc| {
            let mut p = proc_of(ProcessClass::Daemon, 50, 0, 0, 0);
            p.comm = "postgres".into();
            qc.qes[1].processes.push(p);
        });
        fires("X8", 1, |qc| {
            let mut p = proc_of(ProcessClass::Daemon, 51, 0, 0, 0);
            p.comm = "ora_pmon_orcl".into();
            qc.qes[4].processes.push(p);
        });
        let mut qc = clean_qc(6);
        qc.qes[0].processes[0].comm = "postgres".into();
        let mut p = proc_of(ProcessClass::Daemon, 50, 0, 0, 0);
        p.comm = "postgres".into();
        qc.qes[0].processes.push(p);
        assert_eq!(run(std::slice::from_ref(&qc), "X7").violations, Some(0));
    }
}
