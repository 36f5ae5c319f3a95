//! pg_stat_statements beside ttp's figures: its `calls` and
//! `total_exec_time` deltas over the same window, per fingerprint of its
//! normalised text (fingerprint.rs explains why the two join), flagged when
//! they disagree beyond what the window's edges allow.
use std::collections::BTreeMap;

use super::{Group, document::CrossCheckRow, fingerprint::fingerprint};

/// The query that reads pg_stat_statements as one text value: rows
/// separated by U+001E, fields by U+001F.
pub const PGSS_QUERY: &str = "SELECT string_agg(calls::text || chr(31) || total_exec_time::text || chr(31) || queryid::text || chr(31) || query, chr(30)) FROM pg_stat_statements";

/// The key [`parse_pgss`] files a row under by its `queryid`, beside its
/// fingerprint: a group that has a query id joins by it.
pub(crate) fn queryid_key(queryid: i64) -> String {
    format!("\u{0}queryid {queryid}")
}

/// Calls and total_exec_time (ns) per fingerprint, from [`PGSS_QUERY`]'s
/// value. Rows of the cross-check's own query are left out.
pub fn parse_pgss(value: &str) -> BTreeMap<String, (u64, f64)> {
    let mut m: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for row in value.split('\u{1e}') {
        let mut f = row.splitn(4, '\u{1f}');
        let (Some(calls), Some(ms), Some(queryid), Some(query)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        if query.contains("pg_stat_statements") {
            continue;
        }
        let (Ok(calls), Ok(ms)) = (calls.parse::<u64>(), ms.parse::<f64>()) else {
            continue;
        };
        let e = m.entry(fingerprint(query)).or_default();
        e.0 += calls;
        e.1 += ms * 1e6;
        if let Ok(id) = queryid.parse::<i64>() {
            let e = m.entry(queryid_key(id)).or_default();
            e.0 += calls;
            e.1 += ms * 1e6;
        }
    }
    m
}

/// Allowance a call for the portal's own work (see [`rows`]).
pub(crate) const PORTAL_NS_PER_CALL: f64 = 10_000.0;

/// One row per ttp group that pg_stat_statements also saw (or that it
/// missed). A statement under way at either edge of the window can be
/// counted by one side only: each backend has at most one, and `END`'s
/// commit lies between pg_stat_statements' count and `query__done`, so
/// calls may differ by up to 2 per backend. The `execute` pair covers
/// `PortalRun`, pg_stat_statements' time `ExecutorRun` + `ExecutorFinish`
/// (or `ProcessUtility`): the portal's own work lies between, measured at
/// 2–9 µs a call under pgbench here, so times must agree within 5 % plus
/// [`PORTAL_NS_PER_CALL`] a call.
pub fn rows(
    groups: &[Group],
    before: &BTreeMap<String, (u64, f64)>,
    after: &BTreeMap<String, (u64, f64)>,
    backends: usize,
) -> Vec<CrossCheckRow> {
    groups
        .iter()
        .filter(|g| !g.key.contains("pg_stat_statements"))
        .map(|g| {
            // By query id where the group has one (the same statement as
            // pg_stat_statements' row, exactly), else by fingerprint.
            let k = g.queryid.map_or_else(|| g.key.clone(), queryid_key);
            let (c1, e1) = after.get(&k).copied().unwrap_or_default();
            let (c0, e0) = before.get(&k).copied().unwrap_or_default();
            let pgss_calls = c1.saturating_sub(c0);
            let pgss_exec_ns = (e1 - e0).max(0.0) as u64;
            // pg_stat_statements counts no statement that failed.
            let ttp_calls = g.calls - g.errors;
            let calls_off = ttp_calls.abs_diff(pgss_calls) > 2 * backends as u64;
            let (ttp_ns, time_off, elapsed) = match g.waits.get("execute") {
                Some(w) => {
                    let diff = w.wait_ns.abs_diff(pgss_exec_ns) as f64;
                    let off =
                        diff > 0.05 * pgss_exec_ns as f64 + PORTAL_NS_PER_CALL * g.calls as f64;
                    (w.wait_ns, off, false)
                }
                // Socket boundaries: the statement contains its execution
                // (and its parse, plan, commit and reply), so its elapsed
                // time may not be below the executor's, less 5 % for the
                // window's edges.
                None => (
                    g.elapsed_ns,
                    (g.elapsed_ns as f64) < 0.95 * pgss_exec_ns as f64,
                    true,
                ),
            };
            CrossCheckRow {
                key: g.key.clone(),
                ttp_calls,
                pgss_calls,
                ttp_execute_ns: ttp_ns,
                ttp_time_is_elapsed: elapsed,
                pgss_exec_ns,
                disagrees: calls_off || time_off,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GroupBy, Statement, group};
    use ttp_common::statements::{PARTS, WAITS, wait};

    /// Catches the join by fingerprint failing on pg_stat_statements'
    /// `$n` text, and a disagreement not flagged.
    #[test]
    fn joins_and_flags() {
        let mut waits_ns = [0; WAITS];
        waits_ns[wait::EXECUTE] = 10_000_000;
        let s = Statement {
            tgid: 1,
            tid: 1,
            start_ns: 0,
            elapsed_ns: 20_000_000,
            parts: [0; PARTS],
            waits_ns,
            waits: [1; WAITS],
            flags: 0,
            text: "SELECT * FROM t WHERE id = 4".into(),
            ..Default::default()
        };
        let groups = group(&vec![s; 10], GroupBy::Fingerprint, &[true; WAITS]);
        let before = parse_pgss("5\u{1f}1.5\u{1f}-42\u{1f}SELECT * FROM t WHERE id = $1");
        let after = parse_pgss(
            "15\u{1f}101.5\u{1f}-42\u{1f}SELECT * FROM t WHERE id = $1\u{1e}1\u{1f}0.1\u{1f}7\u{1f}SELECT x FROM pg_stat_statements",
        );
        let r = rows(&groups, &before, &after, 1);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].pgss_calls, 10);
        assert_eq!(r[0].pgss_exec_ns, 100_000_000);
        assert!(!r[0].disagrees);
        let far = parse_pgss("40\u{1f}101.5\u{1f}-42\u{1f}SELECT * FROM t WHERE id = $1");
        assert!(rows(&groups, &before, &far, 1)[0].disagrees);
    }
}
