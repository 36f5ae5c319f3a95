//! Sec. 4.5.1 Steps 7–8: per-daemon cut-offs from a short calibration (the
//! paper's 800 × INC128) and an optional long one (40 × INC16384).
//!
//! Step 8 as Table XVI computes it (its worked example, items 1–5):
//! * In each calibration, a daemon identified as infrequent gets the
//!   midpoint between its maximum PT in the central cluster (0 if absent)
//!   and the minimum PT of its identified executions in the L-samples. (The
//!   step list says "average … average"; the worked example uses maximum and
//!   minimum, and only that reproduces Table XVI: flush-9:0 (1 + 126)/2 →
//!   64 ms, jbd2/md0-8 (2 + 6)/2 = 4 ms.)
//! * A daemon identified in one calibration but seen only in the other's
//!   central cluster gets, there, its maximum plus two standard deviations
//!   (item 4: sshd 14 + 2 × 4.7 → 23 ms).
//! * A periodic daemon's task time is 5 % of its period (item 3). Programs
//!   shorter than that use the short calibration's cut-off; programs at
//!   least that long use the maximum of the two (rhn_check: 281 ms below
//!   12 min, 12,828 ms from 12 min). A daemon without a period has one
//!   cut-off, the maximum of the two (item 5).
//! * Every cut-off is at the paper's PT resolution: whole milliseconds,
//!   rounded half up (Table XVI prints bash (0 + 1)/2 as 1 ms, flush-9:0
//!   (1 + 126)/2 as 64 ms, rhnsd 9 + 2 × 1.6 as 12 ms), and never below one
//!   tick of that resolution (1 ms): a daemon execution of at most 1 ms
//!   never drops a run. Without this, bash's 0.5 ms drops sample 451 of
//!   Table IX (bash 1 ms), which Table XVII keeps.
use std::collections::BTreeSet;

use super::{
    analysis::CalibrationAnalysis,
    daemons::{PeriodKind, Periodicity},
};
use crate::profile::{Applies, CutoffBasis, CutoffCase, DaemonCutoff, PROFILE_SCHEMA, Profile};

/// Share of a daemon's period that defines its task time (Step 8 (3)).
pub(crate) const TASK_TIME_SHARE: f64 = 0.05;

/// Resolution of a cut-off: the paper's PT resolution, 1 ms (taskstats
/// ticks, Sec. 3.2; "PT is measured in msec", Sec. 4.5.2 before Table XVIII).
pub(crate) const CUTOFF_RESOLUTION_NS: u64 = 1_000_000;

/// The smallest cut-off: one tick of PT resolution. No daemon execution at
/// or below it drops a run (Table XVII keeps sample 451, bash 1 ms, under
/// bash's cut-off of 1 ms).
pub(crate) const CUTOFF_FLOOR_NS: u64 = CUTOFF_RESOLUTION_NS;

/// `num / den` ns at the cut-off resolution, rounded half up, and at least
/// the floor.
fn at_resolution(num: u128, den: u128) -> u64 {
    let r = u128::from(CUTOFF_RESOLUTION_NS);
    // round(num / (den · r)) = floor((2·num + den·r) / (2·den·r)).
    let ticks = (2 * num + den * r) / (2 * den * r);
    u64::try_from(ticks * r)
        .unwrap_or(u64::MAX)
        .max(CUTOFF_FLOOR_NS)
}

/// Builds the profile (Steps 7–8).
pub fn build_profile(
    short: CalibrationAnalysis,
    long: Option<CalibrationAnalysis>,
    sigma_k: f64,
) -> Profile {
    let names: BTreeSet<String> = short
        .infrequent
        .keys()
        .chain(long.iter().flat_map(|l| l.infrequent.keys()))
        .cloned()
        .collect();
    let daemons = names
        .into_iter()
        .filter_map(|name| daemon_cutoff(&name, &short, long.as_ref(), sigma_k))
        .collect();
    Profile {
        schema: PROFILE_SCHEMA.to_string(),
        created_by: format!("ttp {}", env!("CARGO_PKG_VERSION")),
        daemons,
        cutoff_resolution_ns: Some(CUTOFF_RESOLUTION_NS),
        calibrations: std::iter::once(short).chain(long).collect(),
        procedure: None,
    }
}

fn basis(a: &CalibrationAnalysis, name: &str, sigma_k: f64) -> Option<CutoffBasis> {
    if let Some(d) = a.infrequent.get(name) {
        let central_max = d.central.map(|c| c.max_pt_ns);
        let lo = central_max.unwrap_or(0);
        return Some(CutoffBasis::Midpoint {
            central_max_ns: central_max,
            l_min_ns: d.min_pt_ns,
            // Step 8 (1): the midpoint, at PT resolution.
            cutoff_ns: at_resolution(u128::from(lo) + u128::from(d.min_pt_ns), 2),
        });
    }
    a.central_daemons
        .get(name)
        .map(|c| CutoffBasis::CentralPlusTwoSd {
            central_max_ns: c.max_pt_ns,
            central_sd_ns: c.sd_pt_ns,
            // Step 8 (4): maximum + 2σ, at PT resolution (whole ns first:
            // σ is a real number).
            cutoff_ns: at_resolution(
                (c.max_pt_ns as f64 + sigma_k * c.sd_pt_ns).round().max(0.0) as u128,
                1,
            ),
        })
}

fn period_of(a: &CalibrationAnalysis, name: &str) -> Option<Periodicity> {
    a.infrequent.get(name).and_then(|d| d.periodicity)
}

fn daemon_cutoff(
    name: &str,
    short: &CalibrationAnalysis,
    long: Option<&CalibrationAnalysis>,
    sigma_k: f64,
) -> Option<DaemonCutoff> {
    let sb = basis(short, name, sigma_k);
    let lb = long.and_then(|l| basis(l, name, sigma_k));
    let sc = sb.as_ref().map(CutoffBasis::cutoff_ns);
    let lc = lb.as_ref().map(CutoffBasis::cutoff_ns);
    let max = sc.into_iter().chain(lc).max()?;
    // A regular period from either calibration beats a tentative one; the
    // short calibration (more runs) first.
    let periods: Vec<Periodicity> = std::iter::once(period_of(short, name))
        .chain(std::iter::once(long.and_then(|l| period_of(l, name))))
        .flatten()
        .collect();
    let period = periods
        .iter()
        .find(|p| p.kind == PeriodKind::Regular)
        .or(periods.first())
        .copied();
    let task_time = period.map(|p| (p.period_ns as f64 * TASK_TIME_SHARE).round() as u64);
    let below = sc.or(lc).unwrap_or(max);
    let cases = match task_time {
        Some(tt) if below != max => vec![
            CutoffCase {
                applies: Applies::ShorterThan { task_time_ns: tt },
                cutoff_ns: below,
            },
            CutoffCase {
                applies: Applies::AtLeast { task_time_ns: tt },
                cutoff_ns: max,
            },
        ],
        _ => vec![CutoffCase {
            applies: Applies::Always,
            cutoff_ns: max,
        }],
    };
    Some(DaemonCutoff {
        name: name.to_string(),
        period_ns: period.map(|p| p.period_ns),
        task_time_ns: task_time,
        cases,
        short_basis: sb,
        long_basis: lb,
    })
}

#[cfg(test)]
#[path = "cutoffs_tests.rs"]
mod tests;
