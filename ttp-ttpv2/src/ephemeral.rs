//! Ephemeral processes (App. B): processes that ran during the QE but whose
//! measures were captured by neither image nor an exit record.
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use ttp_window::window::record::{ProcKey, ProcessSets};

/// The three kinds of ephemeral process of App. B (Fig. 9).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ephemeral {
    /// P_x = (M1 − Stopped) − M2: in the before image, gone from the after
    /// image, and its exit never recorded.
    pub px: Vec<ProcKey>,
    /// P_y = ((M2 − M1) − Stopped) − Continuing: started during the QE, in
    /// the after image, but neither still alive nor seen to exit.
    pub py: Vec<ProcKey>,
    /// P_z = ((M1 ∩ M2) − Stopped) − Continuing: in both images, but neither
    /// still alive nor seen to exit.
    pub pz: Vec<ProcKey>,
}

impl Ephemeral {
    pub fn count(&self) -> usize {
        self.px.len() + self.py.len() + self.pz.len()
    }
}

/// App. B's set algebra. `continuing` defaults to App. B's `M2 − Stopped`,
/// with which P_y and P_z are empty by construction; a separately observed
/// set of processes still alive when listening stopped makes them
/// detectable.
pub(crate) fn ephemeral(sets: &ProcessSets) -> Ephemeral {
    let m1: BTreeSet<ProcKey> = sets.m1.iter().copied().collect();
    let m2: BTreeSet<ProcKey> = sets.m2.iter().copied().collect();
    let stopped: BTreeSet<ProcKey> = sets.stopped.iter().copied().collect();
    let continuing: BTreeSet<ProcKey> = match &sets.continuing {
        Some(c) => c.iter().copied().collect(),
        // App. B: Continuing Procs = M2 − Stopped Procs.
        None => m2.difference(&stopped).copied().collect(),
    };
    let minus = |a: &BTreeSet<ProcKey>, b: &BTreeSet<ProcKey>| -> BTreeSet<ProcKey> {
        a.difference(b).copied().collect()
    };
    // App. B: P_x = (M1 − Stopped) − M2.
    let px = minus(&minus(&m1, &stopped), &m2);
    // App. B: P_z = ((M1 ∩ M2) − Stopped) − Continuing.
    let both: BTreeSet<ProcKey> = m1.intersection(&m2).copied().collect();
    let pz = minus(&minus(&both, &stopped), &continuing);
    // App. B: P_y = ((M2 − M1) − Stopped) − Continuing.
    let py = minus(&minus(&minus(&m2, &m1), &stopped), &continuing);
    Ephemeral {
        px: px.into_iter().collect(),
        py: py.into_iter().collect(),
        pz: pz.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(pid: u32) -> ProcKey {
        ProcKey {
            pid,
            start_time_ns: 7,
        }
    }

    fn keys(pids: &[u32]) -> Vec<ProcKey> {
        pids.iter().map(|&p| k(p)).collect()
    }

    /// Fig. 4/9 of App. B: P2 and P8 stop during the QE (recorded), P3 lives
    /// throughout, P9 starts during it, P_x vanishes unrecorded. Catches a
    /// wrong set difference in any of the three formulas.
    #[test]
    fn figure_9_processes() {
        let px = 100;
        let sets = ProcessSets {
            m1: keys(&[2, 3, px]),
            m2: keys(&[3, 9]),
            stopped: keys(&[2, 8]),
            continuing: None,
        };
        let e = ephemeral(&sets);
        assert_eq!(e.px, keys(&[px]));
        assert!(
            e.py.is_empty() && e.pz.is_empty(),
            "empty by App. B's definition of Continuing"
        );
        assert_eq!(e.count(), 1);
    }

    /// With an observed Continuing set, a process in both images that is
    /// neither alive at the end nor recorded as stopped is P_z, one that
    /// started during the QE is P_y. Catches formulas that ignore Continuing.
    #[test]
    fn observed_continuing_exposes_py_and_pz() {
        let sets = ProcessSets {
            m1: keys(&[1, 3]),
            m2: keys(&[1, 3, 5, 6]),
            stopped: keys(&[6]),
            // 3 (in M1 and M2) and 5 (new) vanished after the after image.
            continuing: Some(keys(&[1])),
        };
        let e = ephemeral(&sets);
        assert!(e.px.is_empty());
        assert_eq!(e.pz, keys(&[3]));
        assert_eq!(e.py, keys(&[5]));
    }

    /// Catches keying by pid alone: a reused pid (different start time) is a
    /// different process, so the old one vanished unrecorded.
    #[test]
    fn reused_pid_is_another_process() {
        let old = ProcKey {
            pid: 42,
            start_time_ns: 1,
        };
        let new = ProcKey {
            pid: 42,
            start_time_ns: 2,
        };
        let sets = ProcessSets {
            m1: vec![old],
            m2: vec![new],
            stopped: vec![],
            continuing: None,
        };
        assert_eq!(ephemeral(&sets).px, vec![old]);
        let recorded = ProcessSets {
            stopped: vec![old],
            ..sets
        };
        assert_eq!(ephemeral(&recorded).count(), 0);
    }
}
