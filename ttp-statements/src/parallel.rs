//! Parallel workers: the share of a statement that PostgreSQL runs in other
//! processes.
//!
//! A parallel query's workers are background workers the postmaster forks
//! for one leader; they fire no `query__start`, so their CPU and I/O would
//! be missing from the statement (the leader's wait for them shows as its
//! sleep). Every worker runs `ParallelWorkerMain` and returns from it when
//! its share is done; the leader waits for its workers to exit before its
//! statement ends (`DestroyParallelContext`). The probe program opens a
//! share at that function's entry and closes it at its return, like a
//! statement; its text is the worker's registered name, "parallel worker
//! for PID <leader>" (`BackgroundWorker.bgw_name`, the struct's first field,
//! reached through the global `MyBgworkerEntry`). Here each share is added
//! to the leader's statement that contains it in time.
use std::collections::HashMap;

use object::{Object, ObjectSegment, SymbolKind};
use serde::{Deserialize, Serialize};
use ttp_common::statements::{flag, part};

use super::statement::{Statement, Workers};
use ttp_ledger::probe::{
    statements::{WORKER_FUNCTION, WorkerSite},
    symbols::Image,
};

/// The global pointing at a background worker's registration.
pub(crate) const WORKER_REGISTRATION: &str = "MyBgworkerEntry";

/// Where `binary` lets parallel workers be seen: `None` when it lacks
/// either symbol (then workers are reported as not measured).
pub fn worker_site(binary: &Image) -> Option<WorkerSite> {
    let file = binary.parse().ok()?;
    let find = |name: &str, kind: SymbolKind| {
        ttp_ledger::probe::symbols::defined_address(&file, name, Some(kind))
    };
    let entry = find(WORKER_FUNCTION, SymbolKind::Text)?;
    let global = find(WORKER_REGISTRATION, SymbolKind::Data)?;
    let entry_offset = file.segments().find_map(|seg| {
        let (offset, size) = seg.file_range();
        (entry >= seg.address() && entry < seg.address() + size)
            .then(|| offset + (entry - seg.address()))
    })?;
    Some(WorkerSite {
        entry_offset,
        name_pointer_from_entry: i32::try_from(global as i64 - entry as i64).ok()?,
    })
}

/// The leader's pid in a parallel worker's name.
pub(crate) fn leader_of(name: &str) -> Option<u32> {
    name.strip_prefix("parallel worker for PID ")?
        .trim()
        .parse()
        .ok()
}

/// A group's parallel workers, summed over its statements.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupWorkers {
    /// Statements of the group that had workers.
    pub statements: u64,
    pub workers: u64,
    pub elapsed_ns: u64,
    pub on_cpu_ns: u64,
    pub runq_wait_ns: u64,
    pub sleep_ns: u64,
    pub blocked_ns: u64,
    pub iowait_ns: u64,
    pub iowait_own_ns: u64,
    /// Shares the ledger had no account for: their sleep, blocked and
    /// iowait are not in the sums above.
    #[serde(default)]
    pub without_account: u64,
}

impl GroupWorkers {
    /// The sums over `ss`; `None` when none of them had a worker.
    pub fn of(ss: &[&Statement]) -> Option<Self> {
        let with: Vec<&Workers> = ss
            .iter()
            .map(|s| &s.workers)
            .filter(|w| w.count > 0)
            .collect();
        if with.is_empty() {
            return None;
        }
        let p = |i: usize| with.iter().map(|w| w.parts[i]).sum::<u64>();
        Some(Self {
            statements: with.len() as u64,
            workers: with.iter().map(|w| u64::from(w.count)).sum(),
            elapsed_ns: with.iter().map(|w| w.elapsed_ns).sum(),
            on_cpu_ns: p(part::ON_CPU),
            runq_wait_ns: p(part::RUNQ),
            sleep_ns: p(part::SLEEP),
            blocked_ns: p(part::BLOCKED),
            iowait_ns: p(part::IOWAIT),
            iowait_own_ns: p(part::IOWAIT_OWN),
            without_account: with.iter().map(|w| u64::from(w.without_account)).sum(),
        })
    }
}

/// Moves each worker share of `records` into the statement of its leader
/// that contains it in time (started before the share, done after it).
/// Returns the statements and the shares no statement contained: the
/// leader's statement began before the probes or ended after the records
/// were read, or it was not a statement the probes see (`query__start`
/// fires for the simple query protocol only).
pub fn join(records: Vec<Statement>) -> (Vec<Statement>, Vec<Statement>) {
    let (shares, mut statements): (Vec<Statement>, Vec<Statement>) = records
        .into_iter()
        .partition(|s| s.flags & flag::WORKER != 0);
    // A backend's statements never overlap: by leader, in start order, the
    // one that can contain a share is the last that started before it.
    let mut by_leader: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, s) in statements.iter().enumerate() {
        by_leader.entry(s.tgid).or_default().push(i);
    }
    for v in by_leader.values_mut() {
        v.sort_by_key(|&i| statements[i].start_ns);
    }
    let mut unjoined = Vec::new();
    for w in shares {
        let host = leader_of(&w.text)
            .and_then(|leader| by_leader.get(&leader))
            .and_then(|v| {
                let n = v.partition_point(|&i| statements[i].start_ns <= w.start_ns);
                n.checked_sub(1).map(|k| v[k])
            })
            .filter(|&i| w.done_ns() <= statements[i].done_ns());
        match host {
            Some(i) => statements[i].workers.add(&w),
            None => unjoined.push(w),
        }
    }
    (statements, unjoined)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::ObjectSymbol;
    use ttp_common::statements::PARTS;

    fn rec(tgid: u32, start: u64, elapsed: u64, cpu: u64, text: &str, flags: u32) -> Statement {
        let mut parts = [0; PARTS];
        parts[part::ON_CPU] = cpu;
        Statement {
            tgid,
            tid: tgid,
            start_ns: start,
            elapsed_ns: elapsed,
            parts,
            waits_ns: [0; ttp_common::statements::WAITS],
            waits: [0; ttp_common::statements::WAITS],
            flags,
            text: text.into(),
            ..Default::default()
        }
    }

    /// Catches a share joined to the wrong leader or to a statement of
    /// that leader it does not lie in, and shares counted as statements.
    #[test]
    fn shares_join_the_leaders_statement_that_contains_them() {
        let w = flag::WORKER;
        let records = vec![
            rec(10, 1_000, 100, 50, "parallel worker for PID 7", w),
            rec(11, 1_010, 100, 60, "parallel worker for PID 7", w),
            rec(12, 5_000, 100, 70, "parallel worker for PID 8", w),
            rec(7, 900, 300, 20, "select count(*) from t", 0),
            rec(7, 2_000, 300, 20, "select 1", 0),
            rec(13, 9_000, 100, 80, "parallel worker for PID 7", w),
            rec(14, 1_000, 10, 1, "logical replication worker", w),
        ];
        let (ss, unjoined) = join(records);
        let unjoined = unjoined.len();
        assert_eq!(ss.len(), 2);
        assert_eq!(ss[0].workers.count, 2);
        assert_eq!(ss[0].workers.parts[part::ON_CPU], 110);
        assert_eq!(ss[0].workers.elapsed_ns, 200);
        assert_eq!(ss[1].workers, Workers::default());
        // PID 8 ran no statement; the share at 9 000 lies in none of 7's;
        // a name that is not a parallel worker's names no leader.
        assert_eq!(unjoined, 3);
        let g = GroupWorkers::of(&[&ss[0], &ss[1]]).unwrap();
        assert_eq!((g.statements, g.workers, g.on_cpu_ns), (1, 2, 110));
        assert_eq!(GroupWorkers::of(&[&ss[1]]), None);
    }

    /// Catches a name format that changed.
    #[test]
    fn leader_pid_from_the_worker_name() {
        assert_eq!(leader_of("parallel worker for PID 4242"), Some(4242));
        assert_eq!(leader_of("parallel worker for PID x"), None);
        assert_eq!(leader_of("autovacuum worker"), None);
    }

    /// Catches offsets taken from the wrong symbol or segment: in the
    /// server binary this machine has, the site is the function's file
    /// offset and the global lies after it.
    #[test]
    fn worker_site_of_the_installed_server() {
        let Some(bin) = crate::installed_server() else {
            return;
        };
        let site = worker_site(&Image::read(&bin).unwrap())
            .expect("ParallelWorkerMain and MyBgworkerEntry");
        let data = std::fs::read(&bin).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let f = file
            .dynamic_symbols()
            .find(|s| s.name() == Ok(WORKER_FUNCTION))
            .unwrap();
        // The file offset through the section that holds the function (the
        // site was found through the segments).
        use object::ObjectSection;
        let text = file
            .sections()
            .find(|s| s.address() <= f.address() && f.address() < s.address() + s.size())
            .unwrap();
        let (text_offset, _) = text.file_range().unwrap();
        assert_eq!(
            site.entry_offset,
            text_offset + (f.address() - text.address())
        );
        assert!(site.name_pointer_from_entry > 0);
    }
}
