//! Self-recovery of a Q@C (TTPv2 Sec. 3.2.3), one rule for every way ttp
//! runs a query (`run -- CMD` with `--plan-cmd`, `run --postgres`):
//!
//! * "When a DBMS reveals a different plan for a QE within the same Q@C, we
//!   restart the Q@C": the QEs measured so far are discarded and the Q@C
//!   starts again at QE 1 with the new plan;
//! * "when any exception (e.g., network disconnection or a runtime error)
//!   occurs during query execution … exponential backoff is performed, each
//!   successively doubling the backoff time. If the exception happens more
//!   than the ten-time threshold, then the ongoing experiment is
//!   automatically paused".
//!
//! What counts as such an exception is the caller's to say (a lost
//! connection for PostgreSQL; for a command, docs/run.md "Transient
//! failures"). The Q@C records every restart and retry in
//! [`super::model::Setup::recovery`], so the JSON and the Sec. 9 paragraph
//! state them.
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Sec. 3.2.3: "If the exception happens more than the ten-time threshold,
/// then the ongoing experiment is automatically paused".
pub(crate) const MAX_RETRIES: u32 = 10;
/// Q@C restarts for a changed plan before the run is paused (the paper
/// restarts without a bound; a plan that never settles would loop). ttp's
/// own bound, the same ten as for exceptions.
pub(crate) const MAX_PLAN_RESTARTS: u32 = 10;

/// One restart of a Q@C for a changed plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRestart {
    /// The QE (of the Q@C being restarted) whose plan differed from QE 1's.
    pub qe: u32,
    /// QEs measured with the old plan and discarded.
    pub discarded: u32,
}

/// The restarts and retries of one Q@C.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    /// Times the Q@C was restarted because the plan changed.
    #[serde(default)]
    pub plan_restarts: u32,
    /// Each of those restarts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restarts: Vec<PlanRestart>,
    /// Transient failures retried after a back-off, with their messages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retried_errors: Vec<String>,
}

/// What to do when QE `qe` shows a plan that differs from QE 1's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PlanVerdict {
    /// The plan is QE 1's (or the first): measure the QE.
    Same,
    /// Discard the Q@C's QEs and start again at QE 1.
    Restart,
    /// The plan kept changing: pause the run, with this reason.
    Pause(String),
}

impl Recovery {
    pub(crate) fn is_empty(&self) -> bool {
        self.plan_restarts == 0 && self.retried_errors.is_empty()
    }

    /// Compares the plan captured before QE `qe` with QE 1's (`first`,
    /// `None` before QE 1 or when no plan is captured) and records a
    /// restart; `measured` is how many QEs the restart discards.
    pub(crate) fn check_plan(
        &mut self,
        first: Option<&str>,
        plan: Option<&str>,
        qe: u32,
        measured: u32,
    ) -> PlanVerdict {
        match (first, plan) {
            (Some(a), Some(b)) if a != b => {}
            _ => return PlanVerdict::Same,
        }
        self.plan_restarts += 1;
        self.restarts.push(PlanRestart {
            qe,
            discarded: measured,
        });
        if self.plan_restarts > MAX_PLAN_RESTARTS {
            PlanVerdict::Pause(format!(
                "the plan changed {} times; the query has no stable plan here",
                self.plan_restarts
            ))
        } else {
            PlanVerdict::Restart
        }
    }

    /// Records transient failure `what` after `attempt` earlier retries of
    /// the same QE and returns how long to wait before the next one
    /// (`first`, doubled each retry), or `None` when the ten retries are
    /// spent and the run pauses.
    pub(crate) fn retry(
        &mut self,
        what: String,
        attempt: u32,
        first: Duration,
    ) -> Option<Duration> {
        if attempt >= MAX_RETRIES {
            return None;
        }
        self.retried_errors.push(what);
        Some(backoff(first, attempt))
    }

    /// The sentence the Sec. 9 paragraph (6) carries for the Q@C (named
    /// `name` when the experiment has several), when anything was
    /// restarted or retried.
    pub fn statement(&self, name: Option<&str>) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        if self.plan_restarts > 0 {
            let discarded: u32 = self.restarts.iter().map(|r| r.discarded).sum();
            parts.push(format!(
                "restarted {} time(s) because its plan changed, discarding {discarded} QE(s) measured with the earlier plan",
                self.plan_restarts
            ));
        }
        if !self.retried_errors.is_empty() {
            parts.push(format!(
                "retried {} transient failure(s) with exponential back-off",
                self.retried_errors.len()
            ));
        }
        Some(format!(
            "the Q@C{} was {} (self-recovery, Sec. 3.2.3)",
            name.map(|n| format!(" {n}")).unwrap_or_default(),
            parts.join(" and ")
        ))
    }
}

/// The wait before retry `attempt` (0-based): `first × 2^attempt`
/// (Sec. 3.2.3, "each successively doubling the backoff time").
pub(crate) fn backoff(first: Duration, attempt: u32) -> Duration {
    first.saturating_mul(2u32.saturating_pow(attempt))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a restart missed when the plan changes, one counted when it
    /// does not (no plan, or QE 1), and a run that never pauses.
    #[test]
    fn a_changed_plan_restarts_then_pauses() {
        let mut r = Recovery::default();
        assert_eq!(r.check_plan(None, Some("a"), 1, 0), PlanVerdict::Same);
        assert_eq!(r.check_plan(Some("a"), Some("a"), 2, 1), PlanVerdict::Same);
        assert_eq!(r.check_plan(Some("a"), None, 2, 1), PlanVerdict::Same);
        assert!(r.is_empty());
        assert_eq!(
            r.check_plan(Some("a"), Some("b"), 4, 3),
            PlanVerdict::Restart
        );
        assert_eq!(r.plan_restarts, 1);
        assert_eq!(
            r.restarts,
            [PlanRestart {
                qe: 4,
                discarded: 3
            }]
        );
        for k in 2..=MAX_PLAN_RESTARTS {
            assert_eq!(
                r.check_plan(Some("a"), Some("b"), 2, 1),
                PlanVerdict::Restart
            );
            assert_eq!(r.plan_restarts, k);
        }
        assert!(matches!(
            r.check_plan(Some("a"), Some("b"), 2, 1),
            PlanVerdict::Pause(_)
        ));
        let s = r.statement(Some("q")).unwrap();
        assert!(s.contains("restarted 11 time(s)"), "{s}");
        assert!(s.contains("discarding 13 QE(s)"), "{s}");
    }

    /// The paper's doubling from the first back-off, and the pause after
    /// ten retries. Catches an off-by-one in either.
    #[test]
    fn back_off_doubles_ten_times() {
        let first = Duration::from_millis(100);
        let mut r = Recovery::default();
        let waits: Vec<Duration> = (0..MAX_RETRIES)
            .map(|a| r.retry(format!("e{a}"), a, first).unwrap())
            .collect();
        assert_eq!(waits[0], first);
        assert_eq!(waits[1], Duration::from_millis(200));
        assert_eq!(waits[9], Duration::from_millis(51_200));
        assert_eq!(r.retry("e".into(), MAX_RETRIES, first), None);
        assert_eq!(r.retried_errors.len(), 10);
        let s = r.statement(Some("q")).unwrap();
        assert!(s.contains("retried 10 transient"), "{s}");
    }

    /// A Q@C's recovery reaches its run JSON (under `setup`) and the
    /// paragraph, and survives being read back, as `analyze` reads it.
    /// Catches a restart recorded in memory only.
    #[test]
    fn recovery_is_in_the_json_and_the_paragraph() {
        let mut qc = crate::testutil::clean_qc(8);
        qc.setup.recovery.check_plan(Some("a"), Some("b"), 4, 3);
        let doc = crate::RunDocument::new(&qc, None, crate::testutil::facts_json);
        let v = serde_json::to_value(&doc).unwrap();
        assert_eq!(v["setup"]["recovery"]["plan_restarts"], 1, "{}", v["setup"]);
        assert_eq!(v["setup"]["recovery"]["restarts"][0]["discarded"], 3);
        assert!(
            doc.paragraph
                .contains("the Q@C was restarted 1 time(s) because its plan changed"),
            "{}",
            doc.paragraph
        );
        let back: super::super::model::QcInput =
            serde_json::from_value(serde_json::to_value(&qc).unwrap()).unwrap();
        assert_eq!(back.setup.recovery, qc.setup.recovery);
        // Nothing recovered: nothing written.
        let clean = crate::testutil::clean_qc(8);
        let v = serde_json::to_value(&clean).unwrap();
        assert!(v["setup"].get("recovery").is_none(), "{}", v["setup"]);
    }
}
