use ttp_common::sums::bucket;

use super::*;
use crate::{Statement, variance_split};

/// What the kernel adds for one statement (ttp-ebpf/src/sums.rs), from a
/// statement whose parts are already as the groups read them.
fn add(t: &mut Totals, s: &Statement) {
    t.calls += 1;
    t.elapsed_ns += s.elapsed_ns;
    t.max_ns = t.max_ns.max(s.elapsed_ns);
    for i in 0..PARTS {
        t.parts[i] += s.parts[i];
    }
    for i in 0..WAITS {
        t.waits_ns[i] += s.waits_ns[i];
        t.waits[i] += u64::from(s.waits[i]);
    }
    t.without_account += 1;
    let split = variance_split(s);
    let mut x = [s.elapsed_ns; MOMENTS];
    x[1..].copy_from_slice(&split);
    let u: Vec<u128> = x
        .iter()
        .map(|v| u128::from((v >> MOMENT_SHIFT).min(u64::from(u32::MAX))))
        .collect();
    for i in 0..MOMENTS {
        t.moments[i] += u[i];
        for j in i..MOMENTS {
            t.products[product_index(i, j)] += u[i] * u[j];
        }
    }
    t.hist[bucket(s.elapsed_ns)] += 1;
}

/// A statement on a 16 ns grid (the moments' unit), so that the sums path
/// and the records path see the same values.
fn stmt(elapsed: u64, cpu: u64, runq: u64, lock: u64) -> Statement {
    let g = |v: u64| v / 16 * 16;
    let (elapsed, cpu, runq, lock) = (g(elapsed), g(cpu), g(runq), g(lock));
    let mut s = Statement {
        elapsed_ns: elapsed,
        text: "select $1".into(),
        ..Default::default()
    };
    s.parts[part::ON_CPU] = cpu;
    s.parts[part::RUNQ] = runq;
    s.parts[part::SLEEP] = elapsed - cpu - runq;
    s.waits_ns[wait::LOCK] = lock;
    s.waits[wait::LOCK] = u32::from(lock > 0);
    s
}

/// A deterministic spread of statements (a linear congruential sequence).
fn sample(n: usize) -> Vec<Statement> {
    let mut x = 12345u64;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    (0..n)
        .map(|_| {
            let cpu = 20_000 + next() % 30_000;
            let runq = next() % 8_000;
            let lock = if next() % 10 == 0 {
                next() % 500_000
            } else {
                0
            };
            let sleep = lock + next() % 4_000;
            stmt(cpu + runq + sleep, cpu, runq, lock)
        })
        .collect()
}

/// Eq. 1 from the moments equals eq. 1 from the statements (the variance
/// tree over the records), term by term: catches a population
/// denominator, a wrong cross-product index, a lost carry of the 128-bit
/// sums and an img_statement built from the wrong parts.
#[test]
fn variance_from_moments_equals_variance_from_records() {
    let ss = sample(5000);
    let mut t = Totals::default();
    for s in &ss {
        add(&mut t, s);
    }
    let mut available = [false; WAITS];
    available[wait::LOCK] = true;
    let refs: Vec<&Statement> = ss.iter().collect();
    let want = crate::variance(&refs, &available).unwrap();
    let got = variance(&t, &available).unwrap();
    assert_eq!(got.explained_by, want.explained_by);
    assert!((got.variance_ns2 - want.variance_ns2).abs() <= 1e-6 * want.variance_ns2);
    assert_eq!(got.terms.len(), want.terms.len());
    for w in &want.terms {
        let g = got.terms.iter().find(|g| g.term == w.term).unwrap();
        assert!(
            (g.value_ns2 - w.value_ns2).abs() <= 1e-6 * want.variance_ns2,
            "{}: {} vs {}",
            w.term,
            g.value_ns2,
            w.value_ns2
        );
    }
}

/// The histogram's percentiles within 5 % of the exact order statistics
/// (the HdrHistogram of the records path keeps 3 digits): catches a
/// bucket off by one or a wrong rank.
#[test]
fn percentiles_within_five_percent() {
    let ss = sample(20_000);
    let mut t = Totals::default();
    for s in &ss {
        add(&mut t, s);
    }
    let mut v: Vec<u64> = ss.iter().map(|s| s.elapsed_ns).collect();
    v.sort_unstable();
    let l = latency(&t);
    for (q, got) in [(0.5, l.p50_ns), (0.9, l.p90_ns), (0.99, l.p99_ns)] {
        let exact = v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        let off = got.abs_diff(exact) as f64 / exact as f64;
        assert!(off <= 0.05, "p{q}: {got} vs {exact}");
    }
    assert_eq!(l.max_ns, *v.last().unwrap());
}

/// Two readings' difference is what came between them; keys merge by
/// query id, texts by fingerprint; the `other` key is its own group.
#[test]
fn snapshots_and_grouping() {
    let ss = sample(100);
    let mut a = Totals::default();
    for s in &ss[..40] {
        add(&mut a, s);
    }
    let mut b = a.clone();
    for s in &ss[40..] {
        add(&mut b, s);
    }
    let mut only = Totals::default();
    for s in &ss[40..] {
        add(&mut only, s);
    }
    assert_eq!(b.since(&a).products, only.products);
    assert_eq!(b.since(&a).hist, only.hist);
    let key = |kind, id, user| SumKey {
        database: 5,
        user,
        id,
        kind,
        _pad: 0,
    };
    let mut texts = Texts::default();
    let text = |k: SumKey, t: &str| {
        let mut r = TextRecord {
            key: k,
            tgid: 1,
            text_len: t.len() as u32,
            text: [0; TEXT_LEN],
        };
        r.text[..t.len()].copy_from_slice(t.as_bytes());
        r
    };
    let (q1, q2) = (
        key(key_kind::QUERY_ID, 77, 10),
        key(key_kind::QUERY_ID, 77, 11),
    );
    let (t1, t2) = (key(key_kind::TEXT, 1, 10), key(key_kind::TEXT, 2, 10));
    // Keyed by the kernel's fingerprint where the server gave no query id.
    let t3 = key(key_kind::FINGERPRINT, 3, 10);
    texts.take(&text(q1, "SELECT 1 FROM x WHERE a = 5"));
    texts.take(&text(t3, "select 1 from x where a = 7"));
    texts.take(&text(t1, "select abalance from a where aid = 1"));
    texts.take(&text(t2, "SELECT abalance FROM a WHERE aid = 2"));
    let other = key(key_kind::OTHER, 0, 0);
    let snap = Snapshot(
        [
            (q1, a.clone()),
            (q2, a.clone()),
            (t1, a.clone()),
            (t2, a.clone()),
            (t3, a.clone()),
            (other, a.clone()),
        ]
        .into_iter()
        .collect(),
    );
    let gs = groups(&snap, &texts, GroupBy::Fingerprint, &[false; WAITS]);
    assert_eq!(gs.len(), 3, "{gs:?}");
    let q = gs.iter().find(|g| g.queryid == Some(77)).unwrap();
    assert_eq!(q.calls, 3 * a.calls);
    assert_eq!(q.key, "select $1 from x where a = $2");
    assert_eq!(q.kernel_key.as_deref(), Some("fingerprint+queryid"));
    assert_eq!(q.fingerprint_hash.as_deref(), Some("0000000000000003"));
    let f = gs
        .iter()
        .find(|g| g.key == "select abalance from a where aid = $1")
        .unwrap();
    assert_eq!(f.calls, 2 * a.calls);
    assert_eq!(f.kernel_key.as_deref(), Some("text"));
    assert_eq!(f.fingerprint_hash, None);
    assert!(
        gs.iter()
            .any(|g| g.key == "other" && g.calls == a.calls && g.kernel_key.is_none())
    );
    assert_eq!(snap.other_calls(), a.calls);
}

/// A key summed into `other` between two readings (`--by backend`, an
/// exited backend beyond the ones kept): what it held at the first reading
/// is not counted again as `other`'s growth. Catches a window that counts
/// a pooled backend's whole life once it is folded.
#[test]
fn a_key_folded_into_other_is_not_counted_twice() {
    let ss = sample(30);
    let backend = SumKey {
        kind: key_kind::BACKEND,
        id: 4242,
        ..SumKey::default()
    };
    let other = SumKey {
        kind: key_kind::OTHER,
        ..SumKey::default()
    };
    let (mut old, mut new) = (Totals::default(), Totals::default());
    for s in &ss[..20] {
        add(&mut old, s);
    }
    for s in &ss[20..] {
        add(&mut new, s);
    }
    let earlier = Snapshot([(backend, old.clone())].into_iter().collect());
    // At the later reading the backend's key is gone: its 20 statements
    // and its 10 since sit in `other`.
    let mut folded = old.clone();
    folded.add(&new);
    let later = Snapshot([(other, folded)].into_iter().collect());
    let d = later.since(&earlier);
    assert_eq!(d.calls(), 10);
    assert_eq!(d.0[&other].elapsed_ns, new.elapsed_ns);
}

/// Catches a bucket that wrapped on one CPU between two readings: the
/// window's count is still what that CPU added.
#[test]
fn a_wrapped_bucket_counts_what_came_between() {
    // SAFETY: `Sums` is plain integers: all-zero bytes are valid.
    let zero: Sums = unsafe { std::mem::zeroed() };
    let (mut cpu0, mut cpu1) = (zero, zero);
    cpu0.calls = 10;
    cpu0.hist[7] = u32::MAX - 2;
    cpu1.calls = 4;
    cpu1.hist[7] = 4;
    let before = Totals::of(&[cpu0, cpu1]);
    // Five more on CPU 0 (its bucket wraps), one more on CPU 1.
    cpu0.calls += 5;
    cpu0.hist[7] = cpu0.hist[7].wrapping_add(5);
    cpu1.calls += 1;
    cpu1.hist[7] += 1;
    let after = Totals::of(&[cpu0, cpu1]);
    let window = after.since(&before);
    assert_eq!(window.calls, 6);
    assert_eq!(window.hist[7], 6);
    assert_eq!(window.hist.iter().sum::<u64>(), 6);
}

/// Catches the modular difference applied to totals that do not only
/// grow: `other`'s growth less a key folded into it can leave a bucket
/// below 0, which must read 0, not ~2^32.
#[test]
fn a_bucket_below_zero_is_not_read_as_a_wrap() {
    // SAFETY: `Sums` is plain integers: all-zero bytes are valid.
    let zero: Sums = unsafe { std::mem::zeroed() };
    let mut grown = zero;
    grown.calls = 8;
    grown.hist[3] = 8;
    let mut folded = zero;
    folded.calls = 5;
    folded.hist[3] = 2;
    folded.hist[4] = 3;
    let d = Totals::of(&[grown]).since(&Totals::of(&[folded]));
    assert_eq!(d.calls, 3);
    assert_eq!(d.hist[3], 6);
    assert_eq!(d.hist[4], 0, "a bucket below 0 read as a wrap");
}
