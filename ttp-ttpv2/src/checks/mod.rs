//! Step 1 (Sec. 8.2, App. E): the 25 sanity checks in three classes —
//! experiment-wide (Table X), query-execution (Table XI) and Q@C (Table
//! XII) — and the shape of every check result, shared with the post checks
//! of Step 5 (Table XIV).
pub(crate) mod experiment;
pub(crate) mod qc;
pub mod qe;

use serde::{Deserialize, Serialize};

/// Which class of check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Table X: counts over the whole experiment; none should occur.
    Experiment,
    /// Table XI: percentage of QEs; violating QEs are dropped in Step 2.
    QueryExecution,
    /// Table XII: percentage of Q@Cs (or adjacent Q@C pairs).
    QueryAtCardinality,
    /// Table XIV: after Steps 2–4.
    Post,
}

/// A check as the paper names it.
#[derive(Clone, Copy, Debug)]
pub struct CheckSpec {
    pub id: &'static str,
    pub name: &'static str,
    pub paper: &'static str,
    pub scope: Scope,
    /// What the paper observed over its confirmatory data (Tables X–XIV).
    pub paper_observed: &'static str,
}

const fn spec(
    id: &'static str,
    name: &'static str,
    paper: &'static str,
    scope: Scope,
    paper_observed: &'static str,
) -> CheckSpec {
    CheckSpec {
        id,
        name,
        paper,
        scope,
        paper_observed,
    }
}

use Scope::*;

/// Every check, in the paper's order.
pub const SPECS: &[CheckSpec] = &[
    spec(
        "X1",
        "Number of Missing Queries",
        "Table X (1); App. E",
        Experiment,
        "0",
    ),
    spec(
        "X2",
        "Number of Unique Plan Violations",
        "Table X (2); App. E",
        Experiment,
        "0",
    ),
    spec(
        "X3",
        "Number of Underlying Measure Violations",
        "Table X (3); App. E",
        Experiment,
        "0",
    ),
    spec(
        "X4",
        "Number of Derived Measure Violations",
        "Table X (4); App. E",
        Experiment,
        "0",
    ),
    spec(
        "X5",
        "Number of Steal Time Violations",
        "Table X (5); App. E",
        Experiment,
        "0",
    ),
    spec(
        "X6",
        "Number of Guest Time Violations",
        "Table X (6); App. E",
        Experiment,
        "0",
    ),
    spec(
        "X7",
        "Number of Other Query Process Violations",
        "Table X (7); App. E",
        Experiment,
        "0",
    ),
    spec(
        "X8",
        "Number of Other Utility Process Violations",
        "Table X (8); App. E",
        Experiment,
        "0",
    ),
    spec(
        "QE1",
        "Percentage of Ephemeral Process Violations",
        "Table XI (1); App. B, E",
        QueryExecution,
        "0.01%",
    ),
    spec(
        "QE2",
        "Percentage of DBMS Time Violations",
        "Table XI (2); App. E",
        QueryExecution,
        "0.06%",
    ),
    spec(
        "QE3",
        "Percentage of Zero Query Time Violations",
        "Table XI (3); App. E",
        QueryExecution,
        "0.26%",
    ),
    spec(
        "QE4",
        "Percentage of Query Time Violations",
        "Table XI (4); App. E",
        QueryExecution,
        "0.70%",
    ),
    spec(
        "QE5",
        "Percentage of Query User Tick Violations",
        "Table XI (5); App. E",
        QueryExecution,
        "1.59%",
    ),
    spec(
        "QE6",
        "Percentage of Overall Computation Time Violations",
        "Table XI (6); App. E",
        QueryExecution,
        "2.65%",
    ),
    spec(
        "QE7",
        "Percentage of Computation Time Violations",
        "Table XI (7); App. E",
        QueryExecution,
        "0.14%",
    ),
    spec(
        "QE8",
        "Percentage of BlockIO Delay Time Violations",
        "Table XI (8); App. E",
        QueryExecution,
        "0.01%",
    ),
    spec(
        "QE9",
        "Percentage of IOWait Time Violations",
        "Table XI (9); Sec. 7.3; App. E",
        QueryExecution,
        "1.84%",
    ),
    spec(
        "QE10",
        "Percentage of Context Switch Violations",
        "Table XI (10); App. E",
        QueryExecution,
        "0%",
    ),
    spec(
        "QE11",
        "Percentage of Ambiguous Query Process Violations",
        "Table XI (11); Sec. 7.2; App. E",
        QueryExecution,
        "0.10%",
    ),
    spec(
        "QE12",
        "Percentage of No Query Process Violations",
        "Table XI (12); App. E",
        QueryExecution,
        "0.05%",
    ),
    spec(
        "QE13",
        "Percentage of Timed-Out QE Violations",
        "Table XI (13); App. E",
        QueryExecution,
        "0.02%",
    ),
    spec(
        "XQE1",
        "Percentage of Lost Query Exit Record Violations",
        "ttp's own: the ledger lost thread exit records while the query process stopped (docs/ttpv2.md)",
        QueryExecution,
        "-",
    ),
    spec(
        "QC1",
        "Percentage of Excessive Var. in Query Comp. Time",
        "Table XII (1); App. E",
        QueryAtCardinality,
        "0.14%",
    ),
    spec(
        "QC2",
        "Percentage of Possible Query Result Cache Violations",
        "Table XII (2); Sec. 3.1; App. E",
        QueryAtCardinality,
        "0.17%",
    ),
    spec(
        "QC3",
        "Percentage of Strict Monotonicity Violations",
        "Table XII (3); App. E",
        QueryAtCardinality,
        "0.59%",
    ),
    spec(
        "QC4",
        "Percentage of Relaxed Monotonicity Violations",
        "Table XII (4); App. E",
        QueryAtCardinality,
        "0.32%",
    ),
    spec(
        "POST1",
        "Percentage of Excessive Variation in Calculated Query Time",
        "Table XIV (1); Sec. 8.6",
        Post,
        "0.25%",
    ),
    spec(
        "POST2",
        "Percentage of Strict Monotonicity Violations",
        "Table XIV (2); Sec. 8.6",
        Post,
        "0.68%",
    ),
    spec(
        "POST3",
        "Percentage of Relaxed Monotonicity Violations",
        "Table XIV (3); Sec. 8.6",
        Post,
        "0.35%",
    ),
    spec(
        "POST4",
        "Relative Difference For Measured and Calculated Time for Retained",
        "Table XIV (4); Sec. 8.6",
        Post,
        "2.3%",
    ),
    spec(
        "POST5",
        "Relative Difference For Measured and Calculated Time for Dropped",
        "Table XIV (5); Sec. 8.6",
        Post,
        "7.5%",
    ),
    spec(
        "POST6",
        "Number of Non-Varying Model Measures",
        "Table XIV (6); Sec. 8.6",
        Post,
        "0",
    ),
];

/// The spec of a check id. Panics only on an id not in [`SPECS`], which is
/// a programming error caught by the tests, never user input.
pub(crate) fn spec_of(id: &str) -> &'static CheckSpec {
    SPECS
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("unknown check id {id}"))
}

/// The outcome of one check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    pub id: String,
    pub name: String,
    pub paper: String,
    pub scope: Scope,
    /// Number of violating QEs (or Q@Cs, or Q@C pairs); `None` when n/a.
    pub violations: Option<u64>,
    /// How many QEs / Q@Cs / pairs were examined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluated: Option<u64>,
    /// violations / evaluated × 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
    /// For checks that report a value rather than a count (POST4, POST5:
    /// a relative difference in percent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// What the paper observed (Tables X–XIV).
    pub paper_observed: String,
    /// Why the check cannot apply to this data ("n/a").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub na_reason: Option<String>,
    /// A restriction of how it was applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Which QEs / Q@Cs / measures violated it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offenders: Vec<String>,
    /// Where ttp evaluates the check differently from the paper's text
    /// (several CPUs, ns in place of ticks): the literal rule's outcome,
    /// reported beside and not used to drop anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper_literal: Option<LiteralResult>,
}

/// The outcome of a check's literal rule as the paper states it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LiteralResult {
    pub rule: String,
    pub violations: u64,
    pub evaluated: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offenders: Vec<String>,
}

impl LiteralResult {
    /// Folds literal verdicts; `None` when none could be evaluated.
    pub fn of<'a>(
        rule: &str,
        items: impl IntoIterator<Item = (String, &'a Verdict)>,
    ) -> Option<LiteralResult> {
        let r = aggregate("QE1", items);
        (!r.is_na()).then(|| LiteralResult {
            rule: rule.to_string(),
            violations: r.violations.unwrap_or(0),
            evaluated: r.evaluated.unwrap_or(0),
            offenders: r.offenders,
        })
    }
}

impl CheckResult {
    fn base(id: &str) -> CheckResult {
        let s = spec_of(id);
        CheckResult {
            id: s.id.into(),
            name: s.name.into(),
            paper: s.paper.into(),
            scope: s.scope,
            violations: None,
            evaluated: None,
            percent: None,
            value: None,
            paper_observed: s.paper_observed.into(),
            na_reason: None,
            note: None,
            offenders: Vec::new(),
            paper_literal: None,
        }
    }

    /// A counted check: `violations` out of `evaluated`.
    pub(crate) fn counted(
        id: &str,
        violations: u64,
        evaluated: u64,
        offenders: Vec<String>,
    ) -> CheckResult {
        CheckResult {
            violations: Some(violations),
            evaluated: Some(evaluated),
            percent: (evaluated > 0).then(|| violations as f64 * 100.0 / evaluated as f64),
            offenders,
            ..Self::base(id)
        }
    }

    /// A check that cannot apply, and why.
    pub(crate) fn na(id: &str, reason: impl Into<String>) -> CheckResult {
        CheckResult {
            na_reason: Some(reason.into()),
            ..Self::base(id)
        }
    }

    /// A check reporting a value (POST4/POST5).
    pub(crate) fn valued(id: &str, value: f64, evaluated: u64) -> CheckResult {
        CheckResult {
            value: Some(value),
            evaluated: Some(evaluated),
            ..Self::base(id)
        }
    }

    pub(crate) fn with_note(mut self, note: Option<String>) -> CheckResult {
        self.note = note;
        self
    }

    pub fn is_na(&self) -> bool {
        self.na_reason.is_some()
    }

    pub fn violated(&self) -> bool {
        self.violations.is_some_and(|v| v > 0)
    }
}

/// The outcome of a per-QE (or per-Q@C) check for one item.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Pass,
    Violation,
    NotApplicable(String),
}

impl Verdict {
    pub(crate) fn from_bool(violated: bool) -> Verdict {
        if violated {
            Verdict::Violation
        } else {
            Verdict::Pass
        }
    }

    pub(crate) fn na(reason: impl Into<String>) -> Verdict {
        Verdict::NotApplicable(reason.into())
    }
}

/// Folds verdicts over items (each with a name for the offender list) into
/// one result: n/a when no item could be evaluated, with a note when some
/// could not.
pub(crate) fn aggregate<'a>(
    id: &str,
    items: impl IntoIterator<Item = (String, &'a Verdict)>,
) -> CheckResult {
    let (mut violations, mut evaluated, mut na) = (0u64, 0u64, Vec::new());
    let mut offenders = Vec::new();
    for (name, v) in items {
        match v {
            Verdict::Pass => evaluated += 1,
            Verdict::Violation => {
                evaluated += 1;
                violations += 1;
                offenders.push(name);
            }
            Verdict::NotApplicable(r) => na.push(r.clone()),
        }
    }
    if evaluated == 0 {
        let reason = na
            .first()
            .cloned()
            .unwrap_or_else(|| "nothing to examine".into());
        return CheckResult::na(id, reason);
    }
    let note = (!na.is_empty()).then(|| {
        let mut reasons = na.clone();
        reasons.sort();
        reasons.dedup();
        format!(
            "not evaluated for {} item(s): {}",
            na.len(),
            reasons.join("; ")
        )
    });
    CheckResult::counted(id, violations, evaluated, offenders).with_note(note)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a missing or duplicated check: the paper has 8 + 13 + 4
    /// Step 1 checks and 6 post checks; ttp adds one QE check (XQE1).
    #[test]
    fn spec_table_matches_the_paper() {
        let count = |s: Scope| SPECS.iter().filter(|c| c.scope == s).count();
        assert_eq!(count(Experiment), 8);
        assert_eq!(count(QueryExecution), 13 + 1);
        assert_eq!(count(QueryAtCardinality), 4);
        assert_eq!(count(Post), 6);
        let mut ids: Vec<_> = SPECS.iter().map(|s| s.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), SPECS.len());
    }

    /// Catches n/a items counted as passes (which would dilute the
    /// percentage) and a wrong percentage.
    #[test]
    fn aggregate_excludes_na_from_the_denominator() {
        let v = [
            Verdict::Pass,
            Verdict::Violation,
            Verdict::na("no data"),
            Verdict::Pass,
        ];
        let r = aggregate(
            "QE4",
            v.iter()
                .enumerate()
                .map(|(i, v)| (format!("qe {}", i + 1), v)),
        );
        assert_eq!(r.violations, Some(1));
        assert_eq!(r.evaluated, Some(3));
        assert!((r.percent.unwrap() - 100.0 / 3.0).abs() < 1e-9);
        assert_eq!(r.offenders, vec!["qe 2".to_string()]);
        assert!(r.note.unwrap().contains("no data"));
        let all_na = [Verdict::na("why")];
        let r = aggregate("QE4", all_na.iter().map(|v| (String::new(), v)));
        assert_eq!(r.na_reason.as_deref(), Some("why"));
        assert_eq!(r.violations, None);
    }
}
