//! Builders of constructed QEs for the unit tests.
use super::model::{QcInput, Setup};
use ttp_window::window::record::{
    Measures, OverallMeasures, ProcessClass, ProcessDetail, ProcessMeasures, ProcessSets, QeRecord,
};

/// A process of `class` with U, S and BlockIO ticks and everything else known.
pub(crate) fn proc_of(
    class: ProcessClass,
    pid: u32,
    u: u64,
    s: u64,
    blkio: u64,
) -> ProcessMeasures {
    ProcessMeasures {
        pid: Some(pid),
        start_time_ns: Some(1_000 + u64::from(pid)),
        comm: format!("{}{pid}", class.name()),
        class,
        stopped: false,
        m: Measures {
            u_ticks: Some(u),
            s_ticks: Some(s),
            blkio_ticks: Some(blkio),
            guest_ticks: Some(0),
            cguest_ticks: Some(0),
            minflt: Some(0),
            majflt: Some(0),
            vol_cs: Some(10),
            invol_cs: Some(2),
            read_syscalls: Some(5),
            write_syscalls: Some(1),
            ..Measures::default()
        },
    }
}

pub fn query_proc(pid: u32, u: u64, s: u64, blkio: u64) -> ProcessMeasures {
    proc_of(ProcessClass::Query, pid, u, s, blkio)
}

/// A QE with the given processes and IOWait ticks, overall measures that
/// pass every check, no ephemeral process, exit code 0.
pub(crate) fn qe_with(
    qe: u32,
    time_meas_ms: f64,
    processes: Vec<ProcessMeasures>,
    iowait: u64,
) -> QeRecord {
    let mut r = QeRecord::new(qe, time_meas_ms);
    let user: u64 = processes.iter().filter_map(|p| p.m.u_ticks).sum();
    let sys: u64 = processes.iter().filter_map(|p| p.m.s_ticks).sum();
    r.exit_code = Some(0);
    r.timed_out = Some(false);
    r.detail = ProcessDetail::PerProcess;
    r.overall = OverallMeasures {
        user_ticks: Some(user),
        nice_ticks: Some(0),
        system_ticks: Some(sys),
        idle_ticks: Some(0),
        iowait_ticks: Some(iowait),
        irq_ticks: Some(0),
        softirq_ticks: Some(1),
        steal_ticks: Some(0),
        guest_ticks: Some(0),
        guest_nice_ticks: Some(0),
        forks: Some(0),
        iowait_ns: None,
    };
    let keys: Vec<_> = processes.iter().filter_map(|p| p.key()).collect();
    r.process_sets = Some(ProcessSets {
        m1: keys.clone(),
        m2: keys,
        stopped: vec![],
        continuing: None,
    });
    r.processes = processes;
    r
}

/// A clean QE: query U 150, S 10, BlockIO 40 (+`dq` ticks of U), IOWait
/// 20, a daemon with 5 ticks, Time_meas 2500 ms.
pub(crate) fn clean_qe(qe: u32, dq: u64) -> QeRecord {
    qe_with(
        qe,
        2500.0,
        vec![
            query_proc(1, 150 + dq, 10, 40),
            proc_of(ProcessClass::Daemon, 2, 3, 2, 1),
        ],
        20,
    )
}

/// A Q@C of `n` clean QEs whose query U varies by 0..3 ticks.
pub fn clean_qc(n: u32) -> QcInput {
    QcInput {
        labels: Default::default(),
        source: None,
        command: vec!["q".into()],
        setup: Setup {
            qes_requested: Some(n),
            ..Setup::default()
        },
        qes: (1..=n).map(|i| clean_qe(i, u64::from(i % 4))).collect(),
    }
}

/// The paragraph's facts as JSON: the wording the protocol's own tests
/// give [`crate::analysis::analyse`] (ttp-user words them in English).
#[cfg(test)]
pub(crate) fn facts_json(p: &crate::paragraph::Paragraph) -> String {
    serde_json::to_string(p).unwrap_or_default()
}
