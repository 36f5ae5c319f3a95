//! The rounds of a run of commands: the Q@Cs' QEs interleaved through the
//! one Q@C procedure (`ttp_ttpv2::procedure`: QE i of every Q@C
//! before QE i + 1 of any, the first Q@C rotating; a Q@C restarted for a
//! changed plan, Sec. 3.2.3, starts again at QE 1 while the others go on),
//! each QE kept in its Q@C with the time span it ran in.
use std::ops::ControlFlow;

use anyhow::Context;

use super::{
    attempts::{CommandAttempts, Ran},
    plan::Plan,
};
use ttp_sys::sys::signals::StopFlag;
use ttp_ttpv2::{
    classify,
    model::{QcInput, WarmUp},
    procedure::{self, Interleaved, Step},
};
use ttp_window::window::context::{QeContext, QeError, QeOutcome};
use ttp_window::window::record::QeRecord;

/// When a kept QE ran, on the ledger's clock (for the trace's QE
/// slices): (QE number, start ns, end ns).
pub type QeSpan = (u32, u64, u64);

/// What sees the Q@Cs after every QE: the Q@Cs, the index of the one just
/// measured, the QE's name.
pub type OnQe<'a> = dyn FnMut(&[QcInput], usize, &str) -> anyhow::Result<()> + 'a;

/// How the rounds ended.
pub struct Measured {
    /// The failure that ended the run before every Q@C had its N QEs (the
    /// QEs before it are kept); `None`: done, or Ctrl-C.
    pub failure: Option<anyhow::Error>,
    /// The time span of every QE kept.
    pub spans: Vec<QeSpan>,
    /// The time span of every warm-up execution (its number), for the
    /// trace, which labels it as a warm-up and not as QE 1.
    pub warmups: Vec<QeSpan>,
}

/// Measures `qcs` (built by [`Plan::qc_inputs`]) until every Q@C has its
/// N QEs, Ctrl-C, or a failure that ends the run. After every QE, `on_qe`
/// sees the Q@Cs, the index of the one just measured and the QE's name
/// (to save them, so an interrupted run
/// keeps its QEs, and to show progress); `notify` gets what the user must
/// read (restarts, retries, a QE interrupted). An error is a step before a
/// QE that failed for good, or `on_qe`'s.
pub fn measure(
    ctx: &mut QeContext<'_>,
    plan: &Plan,
    qcs: &mut [QcInput],
    stop: &StopFlag,
    on_qe: &mut OnQe<'_>,
    notify: &dyn Fn(String),
) -> anyhow::Result<Measured> {
    let warmups = warm_up(ctx, plan, qcs, stop, notify)?;
    let mut rounds = Rounds {
        ctx,
        plan,
        stop,
        on_qe,
        notify,
        spans: Vec::new(),
    };
    let end = procedure::interleave(
        qcs,
        plan.qcs.len(),
        stop,
        |qcs, j| (qcs[j].qes.len() as u32) < plan.n,
        |qcs, j| {
            Ok::<_, anyhow::Error>(match rounds.one(qcs, j)? {
                Some(failure) => ControlFlow::Break(failure),
                None => ControlFlow::Continue(()),
            })
        },
    )?;
    let failure = match end {
        Interleaved::Done | Interleaved::Stopped => None,
        Interleaved::Ended(failure) => failure,
    };
    Ok(Measured {
        failure,
        spans: rounds.spans,
        warmups,
    })
}

/// `--warmup N`: each Q@C's command run N times before its QE 1, each
/// after the same steps as a QE (its plan, `--prepare`, the cold cache) and
/// measured in the same Fig. 5 window, then kept only as a summary in the
/// Q@C's set-up (`setup.warmup`): no check or statistic reads it. A
/// one-time cost of the first execution on this machine falls on the
/// warm-up (docs/ttpv2.md, "Warm-up executions"), and QE 1 follows an
/// execution as every later QE does. A command that cannot run ends the warm-ups: QE 1 records why.
fn warm_up(
    ctx: &mut QeContext<'_>,
    plan: &Plan,
    qcs: &mut [QcInput],
    stop: &StopFlag,
    notify: &dyn Fn(String),
) -> anyhow::Result<Vec<QeSpan>> {
    let mut spans = Vec::new();
    for (j, spec) in plan.qcs.iter().enumerate() {
        for w in 1..=plan.warmup {
            if stop.raised() {
                return Ok(spans);
            }
            let mut attempts = CommandAttempts {
                ctx: &mut *ctx,
                plan,
                spec,
            };
            let who = if plan.qcs.len() > 1 {
                format!("{} warm-up {w}", qcs[j].name())
            } else {
                format!("warm-up {w}")
            };
            let out = match procedure::Attempts::attempt(&mut attempts, 0, None)
                .with_context(|| format!("before {who}"))?
            {
                procedure::Attempt::Ran(Ok(out))
                | procedure::Attempt::Transient {
                    ran: Some(Ok(out)), ..
                } => out,
                // The command could not run: QE 1 will fail the same way
                // and be recorded (X1), as without a warm-up.
                procedure::Attempt::Ran(Err(_))
                | procedure::Attempt::Transient {
                    ran: Some(Err(_)), ..
                } => break,
                procedure::Attempt::Transient { what, ran: None } => {
                    notify(format!(
                        "{who}: {what}; not retried (a warm-up is not kept)"
                    ));
                    continue;
                }
                procedure::Attempt::PlanChanged(_) | procedure::Attempt::Interrupted => continue,
            };
            let w = WarmUp::of(&out.record);
            notify(format!(
                "{who}: Time_meas {:.1} ms, U {} S {} ticks, exact {} (measured, not kept)",
                w.time_meas_ms,
                w.u_ticks.map_or("?".into(), |v| v.to_string()),
                w.s_ticks.map_or("?".into(), |v| v.to_string()),
                w.time_exact_ms
                    .map_or("unknown".into(), |v| format!("{v:.1} ms")),
            ));
            qcs[j].setup.warmup.push(w);
            spans.push((qcs[j].setup.warmup.len() as u32, out.t0_ns, out.t1_ns));
        }
    }
    Ok(spans)
}

struct Rounds<'r, 'x> {
    ctx: &'r mut QeContext<'x>,
    plan: &'r Plan,
    stop: &'r StopFlag,
    on_qe: &'r mut OnQe<'r>,
    notify: &'r dyn Fn(String),
    spans: Vec<QeSpan>,
}

impl Rounds<'_, '_> {
    /// The next QE of Q@C `j`. `Some` ends the run, with the failure that
    /// ended it (`None`: Ctrl-C).
    fn one(
        &mut self,
        qcs: &mut [QcInput],
        j: usize,
    ) -> anyhow::Result<Option<Option<anyhow::Error>>> {
        let several = qcs.len() > 1;
        let (plan, spec) = (self.plan, &self.plan.qcs[j]);
        let qc = &mut qcs[j];
        let i = qc.qes.len() as u32 + 1;
        let who = if several {
            format!("{} QE {i}", qc.name())
        } else {
            format!("QE {i}")
        };
        let mut attempts = CommandAttempts {
            ctx: &mut *self.ctx,
            plan,
            spec,
        };
        let step: Step<Ran> =
            procedure::next_qe(&mut attempts, qc, plan.backoff, self.stop, self.notify)
                .with_context(|| format!("before {who}"))?;
        let mut failure = None;
        match step {
            Step::Measured(Ok(_)) if self.stop.raised() => {
                (self.notify)(format!(
                    "{who} interrupted: not kept (the QEs before it are kept)"
                ));
                return Ok(Some(None));
            }
            Step::Measured(Ok(out)) => self.keep(qc, i, out),
            Step::Restarted => {
                if !several {
                    self.spans.clear();
                }
            }
            Step::Interrupted => return Ok(Some(None)),
            Step::Paused {
                kept: Some(Ok(out)),
                why,
            } => {
                self.keep(qc, i, out);
                failure = Some(anyhow::anyhow!("paused: {why}"));
            }
            Step::Paused { kept: None, why } => failure = Some(anyhow::anyhow!("paused: {why}")),
            Step::Measured(Err(e))
            | Step::Paused {
                kept: Some(Err(e)), ..
            } => {
                failure = Some(failed(qc, i, e));
            }
        }
        if let Some(name) = &plan.query_process {
            classify::identify_query_process(&mut qc.qes, name);
        }
        (self.on_qe)(qcs, j, &who)?;
        Ok(failure.map(Some))
    }

    fn keep(&mut self, qc: &mut QcInput, i: u32, out: QeOutcome) {
        self.spans.push((i, out.t0_ns, out.t1_ns));
        qc.qes.push(out.record);
    }
}

/// The error that ends the run when QE `i` could not be measured; a
/// command that could not start is kept as a QE that says why.
fn failed(qc: &mut QcInput, i: u32, e: QeError) -> anyhow::Error {
    if let QeError::Spawn(e) = &e {
        let mut rec = QeRecord::new(i, 0.0);
        rec.spawn_error = Some(e.to_string());
        qc.qes.push(rec);
    }
    super::failure::qe_failure(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_sys::{error::UsageError, sys::spawn::SpawnError};

    fn qc() -> QcInput {
        QcInput {
            labels: Default::default(),
            source: None,
            command: vec!["q".into()],
            setup: Default::default(),
            qes: Vec::new(),
        }
    }

    /// Catches a command that could not start leaving no trace in its Q@C
    /// (the report then says nothing of why), and a user's mistake (not
    /// found) ending with the exit status of a machine failure.
    #[test]
    fn a_command_that_cannot_start_is_kept_and_says_whose_fault() {
        let mut q = qc();
        let e = failed(
            &mut q,
            3,
            QeError::Spawn(SpawnError::NotFound {
                program: "q".into(),
            }),
        );
        assert_eq!(q.qes.len(), 1);
        assert_eq!(q.qes[0].qe, 3);
        assert!(q.qes[0].spawn_error.as_deref().unwrap().contains('q'));
        assert!(e.downcast_ref::<UsageError>().is_some());
        let e = failed(
            &mut q,
            4,
            QeError::Spawn(SpawnError::Exec {
                program: "q".into(),
                source: std::io::Error::from_raw_os_error(libc::EAGAIN),
            }),
        );
        assert_eq!(q.qes.len(), 2);
        assert!(e.downcast_ref::<UsageError>().is_none());
        let e = failed(&mut q, 5, QeError::Blame("no pid".into()));
        assert_eq!(q.qes.len(), 2, "only a start failure is kept as a QE");
        assert!(e.to_string().contains("no pid"));
    }
}
