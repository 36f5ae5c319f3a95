use super::*;
use ttp_common::statements::PARTS;

fn stmt(text: &str, elapsed: u64, cpu: u64, lock: u64) -> Statement {
    let mut parts = [0; PARTS];
    parts[part::ON_CPU] = cpu;
    parts[part::SLEEP] = elapsed - cpu;
    let mut waits_ns = [0; WAITS];
    waits_ns[wait::LOCK] = lock;
    let mut waits = [0; WAITS];
    waits[wait::LOCK] = u32::from(lock > 0);
    Statement {
        tgid: 10,
        tid: 10,
        start_ns: 0,
        elapsed_ns: elapsed,
        parts,
        waits_ns,
        waits,
        flags: 0,
        text: text.into(),
        ..Default::default()
    }
}

/// Two fingerprints; the UPDATE's latency varies only through its lock
/// wait (CPU constant), so eq. 1 names Var(lock_wait) with share 1, and the
/// sums are the hand sums. Catches components mixed up, a lock wait counted
/// twice (inside other_sleep too) or a wrong grouping.
#[test]
fn groups_sums_and_variance() {
    let ss = vec![
        stmt("UPDATE t SET a = 1 WHERE k = 1", 1_000_000, 200_000, 0),
        stmt(
            "UPDATE t SET a = 2 WHERE k = 7",
            3_000_000,
            200_000,
            2_000_000,
        ),
        stmt(
            "UPDATE t SET a = 3 WHERE k = 9",
            5_000_000,
            200_000,
            4_000_000,
        ),
        stmt("SELECT 1", 100_000, 100_000, 0),
    ];
    let avail = [true; WAITS];
    let g = group(&ss, GroupBy::Fingerprint, &avail);
    assert_eq!(g.len(), 2);
    let u = &g[0];
    assert_eq!(u.key, "update t set a = $1 where k = $2");
    assert_eq!(u.calls, 3);
    assert_eq!(u.elapsed_ns, 9_000_000);
    assert_eq!(u.on_cpu_ns, 600_000);
    assert_eq!(u.unattributed_ns, 0);
    assert_eq!(u.waits["lock_wait"].wait_ns, 6_000_000);
    assert_eq!(u.waits["lock_wait"].waits, 2);
    let v = u.variance.as_ref().expect("3 calls vary");
    assert_eq!(v.explained_by, "Var(lock_wait)");
    assert!((v.terms[0].share - 1.0).abs() < 1e-9, "{v:?}");
    // Var(elapsed) of 1, 3, 5 ms: 4 ms² (sample variance).
    assert!((v.variance_ns2 - 4e12).abs() < 1.0);
    // HdrHistogram keeps 3 significant digits: within 0.1 %.
    assert!(
        (u.latency.max_ns as f64 - 5e6).abs() <= 5e3,
        "{:?}",
        u.latency
    );
    assert_eq!(g[1].calls, 1);
    assert!(g[1].variance.is_none());
}

/// Probes the binary lacks are absent, not zero.
#[test]
fn unavailable_waits_are_absent() {
    let ss = vec![stmt("SELECT 1", 10, 10, 0)];
    let mut avail = [true; WAITS];
    avail[wait::SORT] = false;
    let g = group(&ss, GroupBy::Text, &avail);
    assert!(!g[0].waits.contains_key("sort"));
    assert!(g[0].waits.contains_key("lock_wait"));
}
