use super::*;
use ttp_statements::Statement;

fn key(n: usize) -> SeriesKey {
    SeriesKey {
        database: 5,
        user: 10,
        queryid: None,
        fingerprint: format!("select $1 from t{n}"),
    }
}

fn totals(calls: u64, elapsed_ns: u64) -> StatementTotals {
    StatementTotals {
        calls,
        elapsed_ns,
        on_cpu_ns: elapsed_ns / 2,
        ..Default::default()
    }
}

/// Sum of every series ever named and `other`: what was added.
fn everything(s: &StatementSeries) -> StatementTotals {
    let mut t = s.other;
    for v in s.series.values() {
        t += *v;
    }
    t
}

/// Catches a cardinality that grows with the statements (issue: 10 000
/// distinct statements give at most N + 1 series) and a statement lost or
/// counted twice on the way to `other`.
#[test]
fn ten_thousand_distinct_statements_give_at_most_n_plus_one_series() {
    let mut s = StatementSeries::new(50);
    for round in 0..4u64 {
        for n in 0..10_000 {
            s.add(key(n), totals(1, 1_000 + n as u64 * 7 + round));
        }
        s.refresh();
        let view = s.view();
        assert!(view.len() <= 51, "{} series", view.len());
        assert_eq!(view.last().unwrap().0, None, "other comes last");
        assert_eq!(everything(&s).calls, 10_000 * (round + 1));
    }
}

/// Catches a counter that decreases when its series leaves the top N and
/// comes back, and one that restarts from zero on its return.
#[test]
fn a_series_that_falls_out_and_comes_back_resumes_its_total() {
    let mut s = StatementSeries::new(1);
    s.add(key(1), totals(3, 3_000_000));
    s.refresh();
    assert_eq!(s.view()[0], (Some(key(1)), totals(3, 3_000_000)));
    // key 2 is far busier: it takes the one name, key 1's new call goes
    // to `other`, key 1 leaves the exposition.
    s.add(key(2), totals(1, 900_000_000));
    s.add(key(1), totals(1, 1_000_000));
    s.refresh();
    let v = s.view();
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].0, Some(key(2)));
    assert_eq!(v[1], (None, totals(1, 1_000_000)));
    // Many refreshes later key 2 has gone quiet and key 1 is back on top:
    // its series continues from 3 calls.
    for _ in 0..200 {
        s.refresh();
    }
    s.add(key(1), totals(2, 2_000_000));
    s.refresh();
    let v = s.view();
    assert_eq!(v[0], (Some(key(1)), totals(5, 5_000_000)));
    assert_eq!(v[1], (None, totals(1, 1_000_000)), "other never decreases");
    assert_eq!(everything(&s).calls, 7);
}

/// Catches a statement in the wrong latency bucket: each bucket holds the
/// statements at most its bound and above the one before; +Inf the rest.
#[test]
fn latency_buckets_hold_what_their_bounds_say() {
    let mut st = Statement::default();
    for (elapsed_ns, bucket) in [
        (1, 0),
        (50_000, 0),
        (50_001, 1),
        (75_000, 1),
        (1_000_000, 4),
        (10_000_000_000, BUCKETS - 2),
        (10_000_000_001, BUCKETS - 1),
    ] {
        st.elapsed_ns = elapsed_ns;
        let t = StatementTotals::of(&st);
        let mut want = [0; BUCKETS];
        want[bucket] = 1;
        assert_eq!(t.buckets, want, "{elapsed_ns} ns");
        assert_eq!((t.calls, t.elapsed_ns), (1, elapsed_ns));
    }
}
