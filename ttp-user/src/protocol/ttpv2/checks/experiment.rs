//! Experiment-wide sanity checks X1–X8 (Table X, App. E): not a single
//! violation should occur. They flag the run for scrutiny; they drop nothing
//! (Sec. 8.2).
use std::collections::BTreeSet;

use super::{CheckResult, Verdict, aggregate};
use crate::protocol::ttpv2::calc::QeCalc;
use crate::protocol::ttpv2::model::{ProcessClass, ProcessDetail, QcInput, QeRecord};

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
pub fn experiment_checks(qcs: &[QcInput], calcs: &[Vec<QeCalc>]) -> Vec<CheckResult> {
    vec![
        x1_missing(qcs),
        x2_unique_plan(qcs),
        per_qe("X3", qcs, calcs, x3_underlying),
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

/// App. E (3): a process or the overall image lacks an expected measure
/// (Sec. 3.5–3.6): U, S and BlockIO ticks of every process; the overall
/// tick counters.
fn x3_underlying(qe: &QeRecord, _: &QeCalc, _: &QcInput) -> Verdict {
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
        .any(|p| p.m.u_ticks.is_none() || p.m.s_ticks.is_none() || p.m.blkio_ticks.is_none());
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
    use crate::protocol::ttpv2::calc::calc_qe;
    use crate::protocol::ttpv2::testutil::{clean_qc, proc_of};

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
