//! One procedure for every Q@C ttp measures, whatever executes the query
//! (TTPv2 Fig. 5 and Sec. 3.2.3):
//!
//! * [`interleave`]: the QEs of several Q@Cs in rounds, QE i of every Q@C
//!   before QE i + 1 of any, the first Q@C rotating each round
//!   ([`round_order`]);
//! * [`next_qe`]: one QE of a Q@C, its plan checked against QE 1's (a
//!   changed plan restarts the Q@C) and a transient failure retried after
//!   an exponential back-off, the run paused ten retries later
//!   ([`super::recovery`]).
//!
//! What executes a QE is an [`Attempts`]: a command (`run -- CMD`, and the
//! lab worker's tasks through it), a prepared statement of PostgreSQL
//! (`run --postgres`, `experiment`). EMP's runs are interleaved here too;
//! EMP captures no plan and retries nothing, so its runs do
//! not go through [`next_qe`].
use std::{ops::ControlFlow, time::Duration};

use super::{
    model::QcInput,
    recovery::{MAX_PLAN_RESTARTS, MAX_RETRIES, PlanVerdict},
};
use ttp_sys::sys::signals::StopFlag;

/// The Q@Cs in the order of round `round` (1-based): every Q@C once,
/// starting one further each round, so that no Q@C always runs first
/// (after a cache-cold start, or right after the same neighbour) and a
/// drift of the machine during the run is spread over all of them.
pub(crate) fn round_order(round: u32, qcs: usize) -> impl Iterator<Item = usize> {
    let start = if qcs == 0 {
        0
    } else {
        (round.saturating_sub(1) as usize) % qcs
    };
    (0..qcs).map(move |k| (start + k) % qcs)
}

/// How an interleaved measurement ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Interleaved<B> {
    /// No Q@C is pending any more.
    Done,
    /// Ctrl-C between two QEs.
    Stopped,
    /// A QE ended the measurement, for the caller's reason.
    Ended(B),
}

/// Measures Q@Cs `0..count` of `state` in rounds until none is `pending`:
/// each round runs `one` once for every pending Q@C, in [`round_order`].
/// A Q@C restarted for a changed plan stays pending while the others
/// finish. Ctrl-C is looked at before every QE.
pub fn interleave<S: ?Sized, B, E>(
    state: &mut S,
    count: usize,
    stop: &StopFlag,
    pending: impl Fn(&S, usize) -> bool,
    mut one: impl FnMut(&mut S, usize) -> Result<ControlFlow<B>, E>,
) -> Result<Interleaved<B>, E> {
    let mut round = 0u32;
    while (0..count).any(|j| pending(state, j)) {
        round += 1;
        for j in round_order(round, count) {
            if stop.raised() {
                return Ok(Interleaved::Stopped);
            }
            if !pending(state, j) {
                continue;
            }
            if let ControlFlow::Break(b) = one(state, j)? {
                return Ok(Interleaved::Ended(b));
            }
        }
    }
    Ok(Interleaved::Done)
}

/// One attempt at a QE, as what executes the query saw it.
#[derive(Debug)]
pub enum Attempt<O> {
    /// The QE ran: measured, or failed in a way a retry does not mend.
    Ran(O),
    /// The plan captured before the QE differs from QE 1's.
    PlanChanged(String),
    /// A failure of the moment, said in `what`. `ran` is the QE when it
    /// ran: kept if the retries are spent (X1 counts its exit status).
    Transient { what: String, ran: Option<O> },
    /// Ctrl-C during the QE: it is not kept.
    Interrupted,
}

/// What executes the QEs of a Q@C.
pub trait Attempts {
    /// One QE's result.
    type Out;
    /// A failure before the QE that ends the measurement.
    type Error;

    /// One attempt at QE `i`. `first_plan` is QE 1's plan (`None` before
    /// QE 1, or when no plan is captured): a different plan is
    /// [`Attempt::PlanChanged`], before the QE runs.
    fn attempt(
        &mut self,
        i: u32,
        first_plan: Option<&str>,
    ) -> Result<Attempt<Self::Out>, Self::Error>;
}

/// How the next QE of a Q@C ended.
#[derive(Debug)]
pub enum Step<O> {
    Measured(O),
    /// The plan changed: the Q@C's QEs were discarded, and it starts again
    /// at QE 1.
    Restarted,
    /// Transient failures persisted, or the plan kept changing: the run
    /// pauses. `kept` is the last attempt's QE when it ran.
    Paused {
        kept: Option<O>,
        why: String,
    },
    /// Ctrl-C, before an attempt, during a QE or during a back-off.
    Interrupted,
}

/// The next QE of `qc` (QE `qc.qes.len() + 1`), retried and restarted as
/// Sec. 3.2.3 says, every restart and retry recorded in
/// `qc.setup.recovery` and said through `notify`. On
/// [`Step::Restarted`] the Q@C's QEs are already cleared; what the
/// caller keeps beside them (a server's backend pids) is its own to clear.
pub fn next_qe<A: Attempts>(
    attempts: &mut A,
    qc: &mut QcInput,
    backoff: Duration,
    stop: &StopFlag,
    notify: &dyn Fn(String),
) -> Result<Step<A::Out>, A::Error> {
    let i = qc.qes.len() as u32 + 1;
    let first = qc.qes.first().and_then(|q| q.plan.clone());
    let who = qc.name();
    let mut attempt = 0u32;
    loop {
        if stop.raised() {
            return Ok(Step::Interrupted);
        }
        match attempts.attempt(i, first.as_deref())? {
            Attempt::Ran(out) => return Ok(Step::Measured(out)),
            Attempt::Interrupted => return Ok(Step::Interrupted),
            Attempt::PlanChanged(p) => {
                // Sec. 3.2.3: "When a DBMS reveals a different plan for a
                // QE within the same Q@C, we restart the Q@C."
                let measured = qc.qes.len() as u32;
                let r = &mut qc.setup.recovery;
                if let PlanVerdict::Pause(why) =
                    r.check_plan(first.as_deref(), Some(&p), i, measured)
                {
                    return Ok(Step::Paused { kept: None, why });
                }
                notify(format!(
                    "{who} QE {i}: the plan differs from QE 1's (X2); restarting the Q@C ({}/{MAX_PLAN_RESTARTS}), {measured} QE(s) discarded",
                    r.plan_restarts
                ));
                qc.qes.clear();
                return Ok(Step::Restarted);
            }
            Attempt::Transient { what, ran } => {
                let Some(wait) =
                    qc.setup
                        .recovery
                        .retry(format!("QE {i}: {what}"), attempt, backoff)
                else {
                    let why = format!(
                        "QE {i}: {what} (still failing after {MAX_RETRIES} retries with exponential back-off)"
                    );
                    return Ok(Step::Paused { kept: ran, why });
                };
                notify(format!(
                    "{who} QE {i}: {what}; retry {}/{MAX_RETRIES} in {}",
                    attempt + 1,
                    humantime::format_duration(wait)
                ));
                drop(ran);
                stop.sleep(wait);
                attempt += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use ttp_window::window::record::QeRecord;

    /// Catches an order that does not interleave (QE i of every Q@C before
    /// QE i + 1 of any) or does not rotate the first Q@C every round.
    #[test]
    fn rounds_rotate() {
        let order: Vec<Vec<usize>> = (1..=4).map(|r| round_order(r, 3).collect()).collect();
        assert_eq!(order, [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 1, 2]]);
        assert_eq!(round_order(5, 1).collect::<Vec<_>>(), [0]);
    }

    /// Catches a Q@C measured past its count, one left short while another
    /// restarts, and a break that does not end the measurement at once.
    #[test]
    fn interleave_runs_pending_qcs_in_rotating_rounds() {
        let stop = StopFlag::default();
        // Q@C 1 loses its QEs once (a restart) after its second.
        let mut done = vec![0u32; 3];
        let mut order = Vec::new();
        let mut restarted = false;
        let end = interleave(
            &mut done,
            3,
            &stop,
            |d, j| d[j] < 2,
            |d, j| {
                order.push(j);
                d[j] += 1;
                if j == 1 && d[j] == 2 && !restarted {
                    restarted = true;
                    d[j] = 0;
                }
                Ok::<_, ()>(ControlFlow::<()>::Continue(()))
            },
        );
        assert_eq!(end, Ok(Interleaved::Done));
        assert_eq!(done, [2, 2, 2]);
        assert_eq!(order, [0, 1, 2, 1, 2, 0, 1, 1]);
        let mut n = 0;
        let end = interleave(
            &mut n,
            2,
            &stop,
            |n, _| *n < 10,
            |n, _| {
                *n += 1;
                Ok::<_, ()>(if *n == 3 {
                    ControlFlow::Break("failed")
                } else {
                    ControlFlow::Continue(())
                })
            },
        );
        assert_eq!((end, n), (Ok(Interleaved::Ended("failed")), 3));
    }

    /// Attempts that play a script, recording the plan each was given.
    struct Script {
        script: Vec<Attempt<u32>>,
        firsts: RefCell<Vec<Option<String>>>,
    }

    impl Attempts for Script {
        type Out = u32;
        type Error = ();
        fn attempt(&mut self, _i: u32, first: Option<&str>) -> Result<Attempt<u32>, ()> {
            self.firsts.borrow_mut().push(first.map(str::to_string));
            Ok(self.script.remove(0))
        }
    }

    fn qc_with(plans: &[&str]) -> QcInput {
        let mut qc = QcInput {
            labels: Default::default(),
            source: None,
            command: Vec::new(),
            setup: Default::default(),
            qes: Vec::new(),
        };
        for (k, p) in plans.iter().enumerate() {
            let mut r = QeRecord::new(k as u32 + 1, 1.0);
            r.plan = Some(p.to_string());
            qc.qes.push(r);
        }
        qc
    }

    /// Catches a plan change that does not restart the Q@C (or keeps its
    /// QEs), a retry without its record or back-off message, QE 1's plan
    /// not given to the attempt, and a transient failure that never
    /// pauses or loses the QE its last attempt ran.
    #[test]
    fn next_qe_restarts_retries_and_pauses() {
        let stop = StopFlag::default();
        let said = RefCell::new(Vec::new());
        let notify = |m: String| said.borrow_mut().push(m);
        let mut qc = qc_with(&["p1", "p1"]);
        let mut s = Script {
            script: vec![
                Attempt::Transient {
                    what: "lost".into(),
                    ran: None,
                },
                Attempt::PlanChanged("p2".into()),
            ],
            firsts: RefCell::new(Vec::new()),
        };
        let step = next_qe(&mut s, &mut qc, Duration::ZERO, &stop, &notify).unwrap();
        assert!(matches!(step, Step::Restarted));
        assert!(qc.qes.is_empty());
        assert_eq!(qc.setup.recovery.plan_restarts, 1);
        assert_eq!(qc.setup.recovery.retried_errors, ["QE 3: lost"]);
        assert_eq!(*s.firsts.borrow(), [Some("p1".into()), Some("p1".into())]);
        let said = said.borrow();
        assert!(
            said[0].ends_with("QE 3: lost; retry 1/10 in 0s"),
            "{said:?}"
        );
        assert!(said[1].contains("restarting the Q@C (1/10), 2 QE(s) discarded"));

        let mut qc = qc_with(&[]);
        let mut script: Vec<_> = (0..MAX_RETRIES)
            .map(|_| Attempt::Transient {
                what: "exit 75".into(),
                ran: Some(0),
            })
            .collect();
        script.push(Attempt::Transient {
            what: "exit 75".into(),
            ran: Some(7),
        });
        let mut s = Script {
            script,
            firsts: RefCell::new(Vec::new()),
        };
        let step = next_qe(&mut s, &mut qc, Duration::ZERO, &stop, &|_| {}).unwrap();
        let Step::Paused { kept, why } = step else {
            panic!("not paused: {step:?}");
        };
        assert_eq!(kept, Some(7));
        assert!(why.contains("still failing after 10 retries"), "{why}");
        assert_eq!(qc.setup.recovery.retried_errors.len(), MAX_RETRIES as usize);
    }
}
