//! The `statements` result as text and as a stacked bar chart (SVG), and
//! the screens of `--live` (`live.rs`).
pub(crate) mod live;
pub(crate) mod svg;

use std::fmt::Write as _;

use crate::report::units::{grouped, ms};
use ttp_statements::document::StatementsReport;

/// The terminal report: the top `top` groups by elapsed time.
pub fn text(r: &StatementsReport, top: usize) -> String {
    let mut o = String::new();
    let secs = r.window_end_ns.saturating_sub(r.window_start_ns) as f64 / 1e9;
    let _ = writeln!(
        o,
        "ttp statements: postmaster {} ({}), {:.1} s, {} statements from {} backends (semaphores: {})",
        r.postmaster,
        r.binary,
        secs,
        grouped(r.statements),
        r.backends
            .map_or_else(|| "an unread number of".to_string(), |n| n.to_string()),
        r.semaphores
    );
    let errors: u64 = r.groups.iter().map(|g| g.errors).sum();
    if errors > 0 {
        let _ = writeln!(
            o,
            "{} of them failed (an ErrorResponse in the reply; counted in calls, not by pg_stat_statements)",
            grouped(errors)
        );
    }
    match r.extended_statements {
        Some(n) if n > 0 && r.boundaries == "socket" => {
            let _ = writeln!(
                o,
                "{} of them through the extended query protocol (timed from the read of Parse/Bind to ReadyForQuery)",
                grouped(n)
            );
        }
        Some(n) if n > 0 => {
            let _ = writeln!(
                o,
                "{} of them through the extended query protocol (timed from Execute: parse, plan and bind not included)",
                grouped(n)
            );
        }
        Some(_) => {}
        None => {
            let _ = writeln!(
                o,
                "extended query protocol not seen (prepared statements, drivers' parameterised queries): --simple-only, or the binary lacks query__execute__start/done"
            );
        }
    }
    let missing: Vec<&str> = r
        .probes
        .iter()
        .filter(|p| !p.available)
        .map(|p| p.name.as_str())
        .collect();
    let usdt_sites = r.probes.iter().filter(|p| p.name.contains("__"));
    if r.boundaries == "socket" && usdt_sites.clone().all(|p| p.sites == 0) {
        let _ = writeln!(
            o,
            "n/a: no USDT probes in the binary (built without --enable-dtrace): lock, LWLock and buffer waits not measured"
        );
    } else if !missing.is_empty() {
        let _ = writeln!(
            o,
            "unavailable (the binary lacks these probes; not measured): {}",
            missing.join(", ")
        );
    }
    let mut off: Vec<&str> = r
        .probes
        .iter()
        .filter_map(|p| p.not_measured_without.as_deref())
        .collect();
    off.sort_unstable();
    off.dedup();
    if !off.is_empty() {
        let names: Vec<&str> = r
            .probes
            .iter()
            .filter(|p| p.not_measured_without.is_some())
            .map(|p| p.name.as_str())
            .collect();
        let _ = writeln!(
            o,
            "not measured (n/a below): {}; run with --detail {} to measure them",
            names.join(", "),
            off.join(",")
        );
    }
    let _ = writeln!(
        o,
        "{:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  statement",
        "calls",
        "elapsed",
        "on-CPU",
        "runq",
        "iowait",
        "(own)",
        "lock",
        "lwlock",
        "bufread",
        "p50",
        "p99"
    );
    let w = |g: &ttp_statements::Group, k: &str| {
        g.waits
            .get(k)
            .map_or_else(|| "n/a".to_string(), |w| ms(w.wait_ns))
    };
    for g in r.groups.iter().take(top) {
        let mut key = g.key.clone();
        if key.len() > 60 {
            let mut cut = 57;
            while !key.is_char_boundary(cut) {
                cut -= 1;
            }
            key.truncate(cut);
            key.push_str("...");
        }
        let _ = writeln!(
            o,
            "{:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  {}",
            grouped(g.calls),
            ms(g.elapsed_ns),
            ms(g.on_cpu_ns),
            ms(g.runq_wait_ns),
            ms(g.iowait_ns),
            g.iowait_own_ns.map_or_else(|| "n/a".to_string(), ms),
            w(g, "lock_wait"),
            w(g, "lwlock_wait"),
            w(g, "buffer_read"),
            ms(g.latency.p50_ns),
            ms(g.latency.p99_ns),
            key
        );
        if let Some(q) = g.queryid {
            let _ = writeln!(o, "{:>8} queryid {q}", "");
        }
        if let Some(h) = &g.fingerprint_hash {
            let _ = writeln!(
                o,
                "{:>8} fingerprint {h}, computed in the kernel (no query id)",
                ""
            );
        }
        if !g.plan_ids.is_empty() || g.plan_ids_other > 0 {
            let _ = writeln!(o, "{:>8} {}", "", plan_ids(g));
        }
        if let Some(w) = &g.parallel_workers {
            let _ = writeln!(
                o,
                "{:>8} + parallel workers: {} in {} of the calls, on-CPU {} ms, runq {} ms, iowait {} ms (own {} ms), not in the row above{}",
                "",
                grouped(w.workers),
                grouped(w.statements),
                ms(w.on_cpu_ns),
                ms(w.runq_wait_ns),
                ms(w.iowait_ns),
                ms(w.iowait_own_ns),
                if w.without_account > 0 {
                    format!(
                        "; {} without a ledger account (their waits not counted)",
                        w.without_account
                    )
                } else {
                    String::new()
                }
            );
        }
        if let Some(v) = &g.variance {
            let share = v.terms.first().map_or(0.0, |t| t.share);
            let _ = writeln!(
                o,
                "{:>8} variance explained by {} ({:.0} % of Var(elapsed), VProfiler eq. 1)",
                "",
                v.explained_by,
                share * 100.0
            );
        }
    }
    let _ = writeln!(o, "(times in ms, summed over calls; p50/p99 per call)");
    if r.groups.len() > top {
        let _ = writeln!(o, "{} more groups in the JSON output", r.groups.len() - top);
    }
    if !r.tranches.is_empty() {
        let _ = writeln!(o, "LWLock waits by tranche:");
        for t in r.tranches.iter().take(top) {
            let _ = writeln!(
                o,
                "  {:<24} {:>8} waits {:>10} ms",
                t.tranche,
                grouped(t.waits),
                ms(t.wait_ns)
            );
        }
    }
    if let Some(rows) = &r.cross_check {
        let _ = writeln!(
            o,
            "pg_stat_statements over the same window (calls; {}):",
            if r.boundaries == "socket" {
                "ttp's elapsed ms, which contains the execution, vs its execute time ms"
            } else {
                "execute time ms"
            }
        );
        for c in rows.iter().take(top) {
            let _ = writeln!(
                o,
                "  {:>8} vs {:>8}  {:>10} vs {:>10}  {}{}",
                grouped(c.ttp_calls),
                grouped(c.pgss_calls),
                ms(c.ttp_execute_ns),
                ms(c.pgss_exec_ns),
                if c.disagrees { "DISAGREES  " } else { "" },
                c.key
            );
        }
    } else if let Some(n) = &r.cross_check_note {
        let _ = writeln!(o, "pg_stat_statements cross-check: {n}");
    }
    let c = &r.counts;
    // A count the programs' counters give is None where they were not
    // read: the UNREAD line below says so, and no line shows it as 0.
    let n = |v: Option<u64>| v.unwrap_or(0);
    let lost = n(c.records_lost) + n(c.no_state);
    if lost > 0 {
        let _ = writeln!(
            o,
            "LOST: {} statement records ({} ring buffer full, {} without state): those statements are missing above",
            lost,
            n(c.records_lost),
            n(c.no_state)
        );
    }
    if let Some(keys) = c.keys {
        let _ = writeln!(
            o,
            "summed in the kernel: {} statement keys{}",
            grouped(keys),
            if n(c.texts_lost) > 0 {
                format!(
                    "; {} key texts waited for room in their ring (sent again later)",
                    grouped(n(c.texts_lost))
                )
            } else {
                String::new()
            }
        );
    }
    if c.counters_unread > 0 {
        let _ = writeln!(
            o,
            "UNREAD: {} reads of the programs' counters failed ({}): the counts of this report are not measured",
            grouped(c.counters_unread),
            c.counters_error.as_deref().unwrap_or("no reason given")
        );
    }
    if c.sums_unread > 0 {
        let _ = writeln!(
            o,
            "UNREAD: {} reads of a key of the kernel's map failed: that key's figures above may be off (a failed read at the window's end leaves out its statements since the start; at the start, counts those before it)",
            grouped(c.sums_unread)
        );
    }
    if n(c.summed_other) > 0 {
        let _ = writeln!(
            o,
            "FULL: the kernel's map of statement keys had no room for {} statements of new keys: they are summed in the group `other` above. Keys are query ids or fingerprints (by text or backend with --by); more distinct statements than the map holds need --each",
            grouped(n(c.summed_other))
        );
    }
    if n(c.other_processes) > 0 {
        let _ = writeln!(
            o,
            "{} statements of other processes running this binary (not this server's backends) left out",
            grouped(n(c.other_processes))
        );
    }
    if n(c.worker_shares_unjoined) > 0 {
        let _ = writeln!(
            o,
            "{} of {} parallel workers' shares lay in no statement seen (under way at attach, after the window, or of the extended query protocol under --simple-only): left out",
            grouped(n(c.worker_shares_unjoined)),
            grouped(n(c.worker_shares))
        );
    }
    // Without the programs' counters (the UNREAD line above) these
    // counts are not measured: no line shows them as 0.
    let counted = c.counters_unread == 0;
    if r.boundaries == "socket" {
        if counted {
            let _ = writeln!(
                o,
                "boundaries at the client socket: {} socket events in the backends; {} connection start-ups, {} requests that executed nothing (Parse/Describe only) not counted; {} statements open when their backend exited ({} killed) left out; {} USDT wait-probe hits",
                grouped(n(c.socket_events)),
                grouped(n(c.connections)),
                grouped(n(c.prepares)),
                grouped(n(c.exited_open)),
                grouped(n(c.killed_open)),
                grouped(n(c.hits)),
            );
        }
        if let Some(e) = &r.status_entry {
            let _ = writeln!(o, "text, query id and idle state: {e}");
        }
    } else if counted {
        let _ = writeln!(
            o,
            "{} probe hits, {:.2} µs each; {} statements under way at attach not counted; {} ended by an error not counted",
            grouped(n(c.hits)),
            c.mean_probe_ns.unwrap_or(0.0) / 1000.0,
            n(c.done_without_start),
            n(c.restarted)
        );
    }
    o
}

/// PostgreSQL 18's plan ids of a group, with their calls.
fn plan_ids(g: &ttp_statements::Group) -> String {
    let ids: Vec<String> = g
        .plan_ids
        .iter()
        .map(|p| format!("{} ({} calls)", p.plan_id, grouped(p.calls)))
        .collect();
    let mut line = format!("plan ids: {}", ids.join(", "));
    if g.plan_ids_other > 0 {
        line.push_str(&format!(
            "; {} calls under further plan ids",
            grouped(g.plan_ids_other)
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use ttp_common::statements::{PARTS, WAITS, part, wait};
    use ttp_statements::{
        GroupBy, SCHEMA, Statement,
        document::{ProbeAvailability, ProbeCounts, StatementsReport},
        group,
    };

    fn report() -> StatementsReport {
        let mut avail = [true; WAITS];
        avail[wait::SORT] = false;
        let ss: Vec<Statement> = (1..=5u64)
            .map(|i| {
                let mut parts = [0; PARTS];
                parts[part::ON_CPU] = 100_000 * i;
                parts[part::SLEEP] = 900_000;
                Statement {
                    tgid: 7,
                    tid: 7,
                    start_ns: i * 10_000_000,
                    elapsed_ns: 1_000_000 + 100_000 * i,
                    parts,
                    waits_ns: [0; WAITS],
                    waits: [0; WAITS],
                    flags: 0,
                    text: format!("SELECT * FROM t WHERE id = {i}"),
                    ..Default::default()
                }
            })
            .collect();
        StatementsReport {
            schema: SCHEMA.into(),
            postmaster: 42,
            binary: "/usr/lib/postgresql/15/bin/postgres".into(),
            boundaries: "usdt".into(),
            status_entry: None,
            ledger: true,
            semaphores: "kernel uprobe reference counter (ref_ctr_offset)".into(),
            by: GroupBy::Fingerprint,
            window_start_ns: 0,
            window_end_ns: 1_000_000_000,
            extended_statements: Some(0),
            backends: Some(1),
            statements: 5,
            probes: vec![ProbeAvailability {
                name: "sort__start".into(),
                sites: 0,
                available: false,
                not_measured_without: None,
            }],
            counts: ProbeCounts::default(),
            groups: group(&ss, GroupBy::Fingerprint, &avail),
            tranches: Vec::new(),
            cross_check: None,
            cross_check_note: Some("not read (give --pgss CONNINFO)".into()),
        }
    }

    /// The programs' counters unread: the text says so once and shows
    /// none of their counts as 0; the JSON has them null.
    #[test]
    fn unread_counters_are_neither_shown_nor_zero() {
        let mut r = report();
        r.boundaries = "socket".into();
        r.backends = None;
        r.counts.counters_unread = 1;
        r.counts.counters_error = Some("EBADF".into());
        let t = super::text(&r, 20);
        assert!(
            t.contains("UNREAD: 1 reads of the programs' counters failed (EBADF)"),
            "{t}"
        );
        assert!(t.contains("from an unread number of backends"), "{t}");
        assert!(!t.contains("socket events"), "{t}");
        let json = serde_json::to_value(&r).unwrap();
        assert!(json["backends"].is_null(), "{json}");
        assert!(json["counts"]["killed_open"].is_null(), "{json}");
        assert!(json["counts"]["records_lost"].is_null(), "{json}");
    }

    /// At the socket without the ledger: own iowait reads n/a in the text
    /// and is absent from the JSON (never 0), a server without USDT notes
    /// is said to have none, and the socket counts are shown.
    #[test]
    fn socket_report_says_what_was_not_measured() {
        let mut r = report();
        r.boundaries = "socket".into();
        r.ledger = false;
        r.status_entry = Some("PgBackendStatus of PostgreSQL 15".into());
        let ss: Vec<Statement> = (1..=3u64)
            .map(|i| Statement {
                elapsed_ns: 1_000_000 * i,
                flags: ttp_common::statements::flag::SOCKET
                    | ttp_common::statements::flag::NO_ACCOUNT,
                text: "SELECT 1".into(),
                ..Default::default()
            })
            .collect();
        r.groups = group(&ss, GroupBy::Fingerprint, &[false; WAITS]);
        r.counts.connections = Some(4);
        let t = super::text(&r, 20);
        assert!(t.contains("n/a: no USDT probes"), "{t}");
        assert!(t.contains("4 connection start-ups"), "{t}");
        let row = t.lines().find(|l| l.ends_with("select $1")).expect(&t);
        assert!(row.contains("n/a"), "{row}");
        let json = serde_json::to_value(&r).unwrap();
        assert!(json["groups"][0].get("iowait_own_ns").is_none());
        assert_eq!(json["boundaries"], "socket");
    }

    /// PostgreSQL 18's plan ids: a group lists each plan id its
    /// statements ended with and its calls, most first, in the JSON and
    /// under the group's row; a group without any has neither (as on
    /// 14–17, or on 18 with no extension computing plan ids).
    #[test]
    fn plan_ids_beside_the_group() {
        let mut r = report();
        let st = |text: &str, plan_id: u64| Statement {
            elapsed_ns: 1_000_000,
            text: text.into(),
            plan_id,
            ..Default::default()
        };
        let ss = vec![
            st("SELECT 1", 9),
            st("SELECT 2", 7),
            st("SELECT 3", 7),
            st("BEGIN", 0),
        ];
        r.groups = group(&ss, GroupBy::Fingerprint, &[false; WAITS]);
        let t = super::text(&r, 20);
        assert!(t.contains("plan ids: 7 (2 calls), 9 (1 calls)"), "{t}");
        assert_eq!(t.matches("plan ids:").count(), 1, "{t}");
        let json = serde_json::to_value(&r).unwrap();
        let groups = json["groups"].as_array().unwrap();
        let select = groups.iter().find(|g| g["key"] == "select $1").unwrap();
        assert_eq!(
            select["plan_ids"],
            serde_json::json!([{"plan_id": 7, "calls": 2}, {"plan_id": 9, "calls": 1}])
        );
        let begin = groups.iter().find(|g| g["key"] == "begin").unwrap();
        assert!(begin.get("plan_ids").is_none(), "{begin}");
        assert!(begin.get("plan_ids_other").is_none(), "{begin}");
    }

    /// The text names the unavailable probe (never a zero), the group and
    /// the component of eq. 1 that explains its variance (CPU: only it
    /// varies); the JSON reads back through `report` (schema dispatch).
    #[test]
    fn text_json_round_trip() {
        let r = report();
        let t = super::text(&r, 20);
        assert!(
            t.contains("unavailable (the binary lacks these probes; not measured): sort__start"),
            "{t}"
        );
        assert!(t.contains("select * from t where id = $1"), "{t}");
        assert!(t.contains("variance explained by Var(on_cpu)"), "{t}");
        let v = serde_json::to_value(&r).unwrap();
        let back = crate::report::render::load(v).expect("ttp.statements/1 renders");
        assert_eq!(back.text(), t);
    }

    /// The chart is well-formed SVG with one label per group and the
    /// legend's seven parts.
    #[test]
    fn svg_is_well_formed() {
        let svg = super::svg::stacked(&report(), 20).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
        let texts: Vec<String> = doc
            .descendants()
            .filter(|n| n.tag_name().name() == "text")
            .map(|n| n.text().unwrap_or_default().trim().to_string())
            .collect();
        assert!(texts.iter().any(|t| t.contains("5 calls")), "{texts:?}");
        for part in [
            "on-CPU",
            "run-queue wait",
            "iowait",
            "lock wait",
            "unattributed",
        ] {
            assert!(texts.iter().any(|t| t == part), "legend {part}: {texts:?}");
        }
    }
}
