//! PostgreSQL 18's plan ids (`PgBackendStatus.st_plan_id`) beside a
//! group's query id. The server reports a plan id only where an extension
//! computes one (pg_stat_plans, or any planner hook that fills
//! `PlannedStmt.planId`); 18 computes none itself, and 14–17 have no such
//! field. pg_stat_statements 18 does not group by plan id either, so a
//! group stays a statement (a query id or fingerprint) and lists the plan
//! ids its statements ended with, each with its calls: a statement whose
//! plan changed shows two. Statements without a plan id are the group's
//! calls less the listed ones.
//!
//! Bounded: the kernel keeps [`PLAN_SLOTS`] plan ids a key and CPU, and
//! counts the statements of further plan ids in `plans_other`; a group
//! lists at most [`PLAN_SLOTS`] × CPUs × merged keys.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use ttp_common::sums::{PLAN_SLOTS, Sums};

/// One plan id of a group and the statements that ended with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanCalls {
    /// As PostgreSQL shows it (a signed bigint, as `queryid`).
    pub plan_id: i64,
    pub calls: u64,
}

/// Plan ids with their calls, and the statements whose plan id the
/// kernel had no slot for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plans {
    pub calls: BTreeMap<u64, u64>,
    pub other: u64,
}

impl Plans {
    /// One statement's plan id (0: none).
    pub fn count(&mut self, plan_id: u64) {
        if plan_id != 0 {
            *self.calls.entry(plan_id).or_default() += 1;
        }
    }

    /// The slots of one CPU's sums.
    pub(crate) fn add_sums(&mut self, s: &Sums) {
        for i in 0..PLAN_SLOTS {
            if s.plan_ids[i] != 0 && s.plan_calls[i] > 0 {
                *self.calls.entry(s.plan_ids[i]).or_default() += s.plan_calls[i];
            }
        }
        self.other += s.plans_other;
    }

    pub(crate) fn add(&mut self, o: &Plans) {
        for (id, n) in &o.calls {
            *self.calls.entry(*id).or_default() += n;
        }
        self.other += o.other;
    }

    /// What was added since `earlier` (plan ids without a statement since
    /// are left out).
    pub fn since(&self, earlier: &Plans) -> Plans {
        Plans {
            calls: self
                .calls
                .iter()
                .filter_map(|(id, n)| {
                    let d = n.saturating_sub(earlier.calls.get(id).copied().unwrap_or(0));
                    (d > 0).then_some((*id, d))
                })
                .collect(),
            other: self.other.saturating_sub(earlier.other),
        }
    }

    /// The plan ids, most calls first (then by id).
    pub(crate) fn list(&self) -> Vec<PlanCalls> {
        let mut v: Vec<PlanCalls> = self
            .calls
            .iter()
            .map(|(id, n)| PlanCalls {
                plan_id: *id as i64,
                calls: *n,
            })
            .collect();
        v.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.plan_id.cmp(&b.plan_id)));
        v
    }

    /// Statements with a plan id, listed or not.
    #[cfg(test)]
    pub(crate) fn with_plan_id(&self) -> u64 {
        self.calls.values().sum::<u64>() + self.other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sums() -> Sums {
        // SAFETY: plain integers (aya::Pod in userspace): zero is valid.
        unsafe { std::mem::zeroed() }
    }

    /// The slots of two CPUs merge by plan id; free slots (0) and a slot
    /// without calls are no plan; the overflow is kept apart; the list is
    /// by calls, ids shown signed as PostgreSQL shows them.
    #[test]
    fn merges_cpus_by_plan_id() {
        let (mut a, mut b) = (sums(), sums());
        a.plan_ids[..2].copy_from_slice(&[7, u64::MAX]);
        a.plan_calls[..2].copy_from_slice(&[3, 5]);
        b.plan_ids[..1].copy_from_slice(&[7]);
        b.plan_calls[..1].copy_from_slice(&[4]);
        b.plans_other = 2;
        let mut p = Plans::default();
        p.add_sums(&a);
        p.add_sums(&b);
        assert_eq!(
            p.list(),
            vec![
                PlanCalls {
                    plan_id: 7,
                    calls: 7
                },
                PlanCalls {
                    plan_id: -1,
                    calls: 5
                }
            ]
        );
        assert_eq!(p.other, 2);
        assert_eq!(p.with_plan_id(), 14);
        let mut earlier = Plans::default();
        earlier.count(7);
        earlier.count(0);
        let d = p.since(&earlier);
        assert_eq!(d.calls.get(&7), Some(&6));
        assert_eq!(d.calls.get(&u64::MAX), Some(&5));
        assert_eq!(d.other, 2);
        assert_eq!(p.since(&p), Plans::default());
    }
}
