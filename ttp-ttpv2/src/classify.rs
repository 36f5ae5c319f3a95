//! Which process is the query process (Sec. 7.2) when it is chosen by name.
use std::collections::BTreeMap;

use ttp_window::window::record::{ProcKey, ProcessClass, QeRecord};

/// Sec. 7.2: among the processes named `name`, the one that appears in
/// every QE and has the highest total U + S over the Q@C is the query
/// process. It is marked [`ProcessClass::Query`]; the other processes of
/// that name become [`ProcessClass::Utility`]. Returns the chosen process,
/// or `None` when no such process appears in every QE (Step 3 (ii) then
/// drops the Q@C). Idempotent: call it again after each new QE.
pub fn identify_query_process(qes: &mut [QeRecord], name: &str) -> Option<ProcKey> {
    let mut totals: BTreeMap<ProcKey, (usize, u64)> = BTreeMap::new();
    for qe in qes.iter() {
        for p in qe.processes.iter().filter(|p| p.comm == name) {
            if let Some(k) = p.key() {
                let e = totals.entry(k).or_default();
                e.0 += 1;
                e.1 += p.m.su_ticks().unwrap_or(0);
            }
        }
    }
    let n = qes.len();
    let chosen = totals
        .iter()
        .filter(|(_, (seen, _))| *seen == n)
        .max_by_key(|(k, (_, su))| (*su, std::cmp::Reverse(**k)))
        .map(|(k, _)| *k);
    for qe in qes.iter_mut() {
        for p in qe.processes.iter_mut().filter(|p| p.comm == name) {
            p.class = if p.key().is_some() && p.key() == chosen {
                ProcessClass::Query
            } else {
                ProcessClass::Utility
            };
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::proc_of;
    use ttp_window::window::record::ProcessMeasures;

    fn proc(pid: u32, comm: &str, class: ProcessClass, u: u64, s: u64) -> ProcessMeasures {
        ProcessMeasures {
            comm: comm.into(),
            ..proc_of(class, pid, u, s, 0)
        }
    }

    /// Catches choosing a process absent from some QE, or the lower U+S one.
    #[test]
    fn query_process_is_the_busiest_present_in_every_qe() {
        let mut qes: Vec<QeRecord> = (1..=3)
            .map(|i| {
                let mut qe = QeRecord::new(i, 100.0);
                qe.processes
                    .push(proc(10, "postgres", ProcessClass::Utility, 5, 0));
                qe.processes
                    .push(proc(11, "postgres", ProcessClass::Utility, 2, 0));
                qe
            })
            .collect();
        // pid 12 is the busiest but only in QE 2.
        qes[1]
            .processes
            .push(proc(12, "postgres", ProcessClass::Utility, 50, 0));
        let chosen = identify_query_process(&mut qes, "postgres").unwrap();
        assert_eq!(chosen.pid, 10);
        for qe in &qes {
            let q: Vec<_> = qe.of_class(ProcessClass::Query).map(|p| p.pid).collect();
            assert_eq!(q, vec![Some(10)]);
        }
        assert_eq!(qes[1].of_class(ProcessClass::Utility).count(), 2);
    }

    /// Catches a selection that picks something when nothing is in every QE.
    #[test]
    fn no_query_process_when_none_in_every_qe() {
        let mut qes = vec![QeRecord::new(1, 1.0), QeRecord::new(2, 1.0)];
        qes[0]
            .processes
            .push(proc(10, "psql", ProcessClass::Daemon, 5, 0));
        qes[1]
            .processes
            .push(proc(11, "psql", ProcessClass::Daemon, 5, 0));
        assert_eq!(identify_query_process(&mut qes, "psql"), None);
        assert!(!qes[0].has_query_process());
    }
}
