//! Groups from the sums the kernel keeps per statement key
//! (ttp_common::sums, ttp-ebpf/src/sums.rs): userspace reads the map on
//! its interval, keeps each key's totals and text, and never holds a
//! statement. What it holds is bounded by the keys: the kernel's map has at
//! most 4096, a key's text is kept once.
//!
//! The groups carry what [`super::group`] computes from records: the sums
//! directly; the percentiles from the log-linear histogram (a bucket's
//! midpoint, within 3.1 % of every value in it); the variance split of
//! VProfiler's eq. 1 (paper 004, Sec. 3.1) from the sums and
//! cross-products of the split's variables: Cov(X, Y) = (Σxy − ΣxΣy/n) /
//! (n − 1), the sample covariance the record path computes.
use std::collections::{BTreeMap, HashMap};

use ttp_common::{
    statements::{PARTS, TEXT_LEN, TEXT_UNTERMINATED, WAITS, part, wait},
    sums::{
        HIST_BUCKETS, MOMENT_SHIFT, MOMENTS, PRODUCTS, SumKey, Sums, TextRecord, bucket_range,
        key_kind, product_index,
    },
};

use super::{
    Group, GroupBy, Latency, Split, VARIANCE_PARTS, Variance, VarianceTerm,
    fingerprint::fingerprint, parallel::GroupWorkers, plans::Plans,
};
use ttp_variance::{FnName, Term};

/// One key's sums over every CPU (or a difference of two readings).
#[derive(Debug, Clone, PartialEq)]
pub struct Totals {
    pub calls: u64,
    pub errors: u64,
    pub extended: u64,
    pub without_account: u64,
    pub elapsed_ns: u64,
    pub max_ns: u64,
    pub parts: [u64; PARTS],
    pub waits_ns: [u64; WAITS],
    pub waits: [u64; WAITS],
    pub moments: [u128; MOMENTS],
    pub products: [u128; PRODUCTS],
    pub with_workers: u64,
    pub workers: u64,
    pub workers_without_account: u64,
    pub workers_elapsed_ns: u64,
    pub workers_parts: [u64; PARTS],
    /// PostgreSQL 18's plan ids ([`super::plans`]).
    pub plans: Plans,
    pub hist: Vec<u64>,
}

impl Default for Totals {
    fn default() -> Self {
        Self {
            calls: 0,
            errors: 0,
            extended: 0,
            without_account: 0,
            elapsed_ns: 0,
            max_ns: 0,
            parts: [0; PARTS],
            waits_ns: [0; WAITS],
            waits: [0; WAITS],
            moments: [0; MOMENTS],
            products: [0; PRODUCTS],
            with_workers: 0,
            workers: 0,
            workers_without_account: 0,
            workers_elapsed_ns: 0,
            workers_parts: [0; PARTS],
            plans: Plans::default(),
            hist: vec![0; HIST_BUCKETS],
        }
    }
}

fn add_each<const N: usize, T: Copy + std::ops::AddAssign>(a: &mut [T; N], b: &[T; N]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += *y;
    }
}

impl Totals {
    /// The sums of one key over its CPUs' values.
    pub fn of(per_cpu: &[Sums]) -> Self {
        let mut t = Totals::default();
        for c in per_cpu {
            t.calls += c.calls;
            t.errors += c.errors;
            t.extended += c.extended;
            t.without_account += c.without_account;
            t.elapsed_ns += c.elapsed_ns;
            t.max_ns = t.max_ns.max(c.max_ns);
            add_each(&mut t.parts, &c.parts);
            add_each(&mut t.waits_ns, &c.waits_ns);
            add_each(&mut t.waits, &c.waits);
            for i in 0..MOMENTS {
                t.moments[i] += u128::from(c.moments[i]);
            }
            for i in 0..PRODUCTS {
                let [lo, hi] = c.products[i];
                t.products[i] += u128::from(lo) | (u128::from(hi) << 64);
            }
            t.with_workers += c.with_workers;
            t.workers += c.workers;
            t.workers_without_account += c.workers_without_account;
            t.workers_elapsed_ns += c.workers_elapsed_ns;
            add_each(&mut t.workers_parts, &c.workers_parts);
            t.plans.add_sums(c);
            for (h, v) in t.hist.iter_mut().zip(c.hist.iter()) {
                *h += u64::from(*v);
            }
        }
        t
    }

    /// Adds `o` (another key merged into the same group).
    pub(crate) fn add(&mut self, o: &Totals) {
        self.calls += o.calls;
        self.errors += o.errors;
        self.extended += o.extended;
        self.without_account += o.without_account;
        self.elapsed_ns += o.elapsed_ns;
        self.max_ns = self.max_ns.max(o.max_ns);
        add_each(&mut self.parts, &o.parts);
        add_each(&mut self.waits_ns, &o.waits_ns);
        add_each(&mut self.waits, &o.waits);
        add_each(&mut self.moments, &o.moments);
        add_each(&mut self.products, &o.products);
        self.with_workers += o.with_workers;
        self.workers += o.workers;
        self.workers_without_account += o.workers_without_account;
        self.workers_elapsed_ns += o.workers_elapsed_ns;
        add_each(&mut self.workers_parts, &o.workers_parts);
        self.plans.add(&o.plans);
        for (h, v) in self.hist.iter_mut().zip(&o.hist) {
            *h += *v;
        }
    }

    /// What was added between the reading `earlier` and this one (the
    /// sums only grow). The maximum is this reading's: the kernel keeps no
    /// maximum per interval.
    pub fn since(&self, earlier: &Totals) -> Totals {
        fn sub<const N: usize, T: Copy + Default + std::ops::Sub<Output = T> + Ord>(
            a: &[T; N],
            b: &[T; N],
        ) -> [T; N] {
            let mut o = *a;
            for (x, y) in o.iter_mut().zip(b) {
                *x = if *x > *y { *x - *y } else { T::default() };
            }
            o
        }
        let calls = self.calls.saturating_sub(earlier.calls);
        Totals {
            calls,
            errors: self.errors.saturating_sub(earlier.errors),
            extended: self.extended.saturating_sub(earlier.extended),
            without_account: self.without_account.saturating_sub(earlier.without_account),
            elapsed_ns: self.elapsed_ns.saturating_sub(earlier.elapsed_ns),
            max_ns: self.max_ns,
            parts: sub(&self.parts, &earlier.parts),
            waits_ns: sub(&self.waits_ns, &earlier.waits_ns),
            waits: sub(&self.waits, &earlier.waits),
            moments: sub(&self.moments, &earlier.moments),
            products: sub(&self.products, &earlier.products),
            with_workers: self.with_workers.saturating_sub(earlier.with_workers),
            workers: self.workers.saturating_sub(earlier.workers),
            workers_without_account: self
                .workers_without_account
                .saturating_sub(earlier.workers_without_account),
            workers_elapsed_ns: self
                .workers_elapsed_ns
                .saturating_sub(earlier.workers_elapsed_ns),
            workers_parts: sub(&self.workers_parts, &earlier.workers_parts),
            plans: self.plans.since(&earlier.plans),
            // The kernel's buckets are u32 a CPU and wrap: a sum of them
            // over the CPUs is right modulo 2^32, and so is the difference
            // of two such sums, which is then the exact count of a window
            // that adds fewer than 2^32 statements to a bucket. A bucket
            // never gains more than the calls added: a larger difference
            // is of two totals that do not only grow (`other` less the
            // keys folded into it, `Snapshot::since`), taken plainly.
            hist: self
                .hist
                .iter()
                .zip(&earlier.hist)
                .map(|(a, b)| {
                    let wrapped = u64::from((*a as u32).wrapping_sub(*b as u32));
                    if wrapped <= calls {
                        wrapped
                    } else {
                        a.saturating_sub(*b)
                    }
                })
                .collect(),
        }
    }
}

/// Every key's totals at one reading.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot(pub BTreeMap<SumKey, Totals>);

impl Snapshot {
    /// What each key added since `earlier` (keys without a statement
    /// since are left out). A key of `earlier` missing from this reading
    /// was summed into `other` in between (`--by backend`, an exited
    /// backend beyond the ones kept: session.rs, `evict_exited`): what it
    /// held at `earlier` is taken off `other`'s growth, so that statements
    /// from before `earlier` are not counted as new.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let other = SumKey {
            kind: ttp_common::sums::key_kind::OTHER,
            ..SumKey::default()
        };
        let mut folded = Totals::default();
        for (k, t) in &earlier.0 {
            if !self.0.contains_key(k) {
                folded.add(t);
            }
        }
        Snapshot(
            self.0
                .iter()
                .filter_map(|(k, t)| {
                    let mut d = match earlier.0.get(k) {
                        Some(e) => t.since(e),
                        None => t.clone(),
                    };
                    if *k == other && folded.calls > 0 {
                        d = d.since(&folded);
                    }
                    (d.calls > 0).then_some((*k, d))
                })
                .collect(),
        )
    }

    /// Statements in all keys.
    pub(crate) fn calls(&self) -> u64 {
        self.0.values().map(|t| t.calls).sum()
    }

    /// Statements summed under the `other` key.
    #[cfg(test)]
    pub(crate) fn other_calls(&self) -> u64 {
        self.0
            .iter()
            .filter(|(k, _)| k.kind == key_kind::OTHER)
            .map(|(_, t)| t.calls)
            .sum()
    }
}

/// A key's text as the kernel sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyText {
    pub text: String,
    /// Cut at 255 bytes.
    pub truncated: bool,
    /// A backend that ran it.
    pub tgid: u32,
}

/// Texts by key: one each, bounded by the keys.
#[derive(Debug, Clone, Default)]
pub struct Texts(pub HashMap<SumKey, KeyText>);

impl Texts {
    /// Keeps the text of `r` (the first one of a key; a key's text comes
    /// once from each CPU that ended one of its statements).
    pub fn take(&mut self, r: &TextRecord) {
        self.0.entry(r.key).or_insert_with(|| {
            let (len, truncated) = match r.text_len {
                TEXT_UNTERMINATED => match r.text.iter().position(|b| *b == 0) {
                    Some(n) => (n, false),
                    None => (TEXT_LEN - 1, true),
                },
                n => ((n as usize).min(TEXT_LEN), false),
            };
            KeyText {
                text: String::from_utf8_lossy(&r.text[..len]).into_owned(),
                truncated,
                tgid: r.tgid,
            }
        });
    }
}

/// The group a key belongs to under `by`: its id (keys of one id merge),
/// its shown key, an example text, and PostgreSQL's query id where the key
/// is one. Keys merge by fingerprint, as the records' groups do: a
/// statement can reach the kernel under its query id and, where the
/// server reported none for it (pg_stat_statements zeroes a cached
/// utility statement's), under its fingerprint.
fn group_of(
    key: &SumKey,
    texts: &Texts,
    by_queryid: &HashMap<u64, &KeyText>,
    by: GroupBy,
) -> (String, String, String, Option<i64>) {
    // A query id's text may have come under another database or user.
    let text = texts
        .0
        .get(key)
        .or_else(|| (key.kind == key_kind::QUERY_ID).then(|| by_queryid.get(&key.id).copied())?)
        .map(|t| t.text.clone());
    let example = text.clone().unwrap_or_default();
    match key.kind {
        key_kind::OTHER => (
            "other".into(),
            "other".into(),
            "(statements of keys beyond the kernel map's room)".into(),
            None,
        ),
        key_kind::NO_TEXT => (String::new(), String::new(), String::new(), None),
        key_kind::BACKEND => {
            let k = format!("backend {}", key.id);
            (k.clone(), k, example, None)
        }
        key_kind::QUERY_ID => {
            // pg_stat_statements shows its queryid as a signed bigint.
            let id = key.id as i64;
            let shown = match &text {
                Some(t) => fingerprint(t),
                None => format!("queryid {id}"),
            };
            (format!("t{shown}"), shown, example, Some(id))
        }
        _ => {
            let shown = match (&text, by) {
                (Some(t), GroupBy::Text) => t.clone(),
                (Some(t), _) => fingerprint(t),
                (None, _) => format!("(text not received, hash {:016x})", key.id),
            };
            (format!("t{shown}"), shown.clone(), example, None)
        }
    }
}

/// The name of a key kind in [`Group::kernel_key`] (none for `other` and
/// statements without a text).
fn kind_name(kind: u32) -> Option<&'static str> {
    match kind {
        key_kind::QUERY_ID => Some("queryid"),
        key_kind::FINGERPRINT => Some("fingerprint"),
        key_kind::TEXT => Some("text"),
        key_kind::BACKEND => Some("backend"),
        _ => None,
    }
}

/// Groups the keys of `snap`, largest elapsed first, as [`super::group`]
/// does for records.
pub fn groups(
    snap: &Snapshot,
    texts: &Texts,
    by: GroupBy,
    available: &[bool; WAITS],
) -> Vec<Group> {
    struct Merged {
        shown: String,
        example: String,
        /// Query ids of its keys (the group shows one only if it is the
        /// only one).
        queryids: Vec<i64>,
        /// Kinds of its keys, and the ids of its fingerprint keys.
        kinds: std::collections::BTreeSet<&'static str>,
        fingerprints: Vec<u64>,
        totals: Totals,
        truncated: u64,
    }
    let by_queryid: HashMap<u64, &KeyText> = texts
        .0
        .iter()
        .filter(|(k, _)| k.kind == key_kind::QUERY_ID)
        .map(|(k, t)| (k.id, t))
        .collect();
    let mut merged: BTreeMap<String, Merged> = BTreeMap::new();
    for (key, t) in &snap.0 {
        if t.calls == 0 {
            continue;
        }
        let (id, shown, example, queryid) = group_of(key, texts, &by_queryid, by);
        let truncated = texts.0.get(key).is_some_and(|x| x.truncated);
        let e = merged.entry(id).or_insert_with(|| Merged {
            shown,
            example,
            queryids: Vec::new(),
            kinds: Default::default(),
            fingerprints: Vec::new(),
            totals: Totals::default(),
            truncated: 0,
        });
        e.totals.add(t);
        if let Some(q) = queryid
            && !e.queryids.contains(&q)
        {
            e.queryids.push(q);
        }
        if truncated {
            e.truncated += t.calls;
        }
        if let Some(k) = kind_name(key.kind) {
            e.kinds.insert(k);
        }
        if key.kind == key_kind::FINGERPRINT && !e.fingerprints.contains(&key.id) {
            e.fingerprints.push(key.id);
        }
    }
    let mut out: Vec<Group> = merged
        .into_values()
        .map(|m| {
            let mut g = group(m.shown, m.example, &m.totals, available);
            g.queryid = match m.queryids[..] {
                [q] => Some(q),
                _ => None,
            };
            g.truncated = m.truncated;
            g.kernel_key =
                (!m.kinds.is_empty()).then(|| m.kinds.into_iter().collect::<Vec<_>>().join("+"));
            g.fingerprint_hash = match m.fingerprints[..] {
                [h] => Some(format!("{h:016x}")),
                _ => None,
            };
            g
        })
        .collect();
    out.sort_by(|a, b| b.elapsed_ns.cmp(&a.elapsed_ns).then(a.key.cmp(&b.key)));
    out
}

/// One group from its totals (the fields `summarise` fills from records).
pub fn group(key: String, example: String, t: &Totals, available: &[bool; WAITS]) -> Group {
    let split = Split::of(
        t.elapsed_ns,
        &t.parts,
        |i| (t.waits[i], t.waits_ns[i]),
        available,
        t.without_account < t.calls,
    );
    Group {
        key,
        queryid: None,
        kernel_key: None,
        fingerprint_hash: None,
        plan_ids: t.plans.list(),
        plan_ids_other: t.plans.other,
        example,
        calls: t.calls,
        elapsed_ns: t.elapsed_ns,
        on_cpu_ns: split.on_cpu_ns,
        runq_wait_ns: split.runq_wait_ns,
        sleep_ns: split.sleep_ns,
        blocked_ns: split.blocked_ns,
        iowait_ns: split.iowait_ns,
        iowait_own_ns: split.iowait_own_ns,
        iowait_others_ns: split.iowait_others_ns,
        iowait_share_ns: split.iowait_share_ns,
        errors: t.errors,
        extended: t.extended,
        unattributed_ns: split.unattributed_ns,
        waits: split.waits,
        latency: latency(t),
        variance: variance(t, available),
        truncated: 0,
        without_account: t.without_account,
        parallel_workers: (t.with_workers > 0).then(|| GroupWorkers {
            statements: t.with_workers,
            workers: t.workers,
            elapsed_ns: t.workers_elapsed_ns,
            on_cpu_ns: t.workers_parts[part::ON_CPU],
            runq_wait_ns: t.workers_parts[part::RUNQ],
            sleep_ns: t.workers_parts[part::SLEEP],
            blocked_ns: t.workers_parts[part::BLOCKED],
            iowait_ns: t.workers_parts[part::IOWAIT],
            iowait_own_ns: t.workers_parts[part::IOWAIT_OWN],
            without_account: t.workers_without_account,
        }),
    }
}

/// The value at quantile `q` of the histogram: the midpoint of the bucket
/// that holds it (within 3.1 % of it), at most the maximum.
fn quantile(t: &Totals, q: f64) -> u64 {
    let n: u64 = t.hist.iter().sum();
    if n == 0 {
        return 0;
    }
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut seen = 0;
    for (i, c) in t.hist.iter().enumerate() {
        seen += c;
        if seen >= rank {
            let (lo, w) = bucket_range(i);
            return (lo + w / 2).min(t.max_ns);
        }
    }
    t.max_ns
}

fn latency(t: &Totals) -> Latency {
    Latency {
        mean_ns: if t.calls > 0 {
            t.elapsed_ns as f64 / t.calls as f64
        } else {
            0.0
        },
        p50_ns: quantile(t, 0.5),
        p90_ns: quantile(t, 0.9),
        p99_ns: quantile(t, 0.99),
        max_ns: t.max_ns,
    }
}

/// Eq. 1 over [`VARIANCE_PARTS`] (paper 004, Sec. 3.1) from the moments:
/// the sample covariance matrix of (elapsed, the split's parts), then
/// each term as the record path's variance tree computes it, with
/// `img_statement` = elapsed − Σ parts. `None` with fewer than 2 calls or
/// no variance. An unmeasured lock or LWLock pair is no term (its time is
/// in `other_sleep`, as in [`super::variance`]).
// Index loops: a symmetric matrix filled from its upper triangle.
#[allow(clippy::needless_range_loop)]
pub(crate) fn variance(t: &Totals, available: &[bool; WAITS]) -> Option<Variance> {
    let n = t.calls as f64;
    if t.calls < 2 {
        return None;
    }
    let unit2 = f64::from(1u32 << (2 * MOMENT_SHIFT));
    let mut c = [[0f64; MOMENTS]; MOMENTS];
    for i in 0..MOMENTS {
        for j in i..MOMENTS {
            let (si, sj) = (t.moments[i] as f64, t.moments[j] as f64);
            let v = (t.products[product_index(i, j)] as f64 - si * sj / n) / (n - 1.0) * unit2;
            c[i][j] = v;
            c[j][i] = v;
        }
    }
    let root_var = c[0][0];
    if root_var <= 0.0 {
        return None;
    }
    // Variables 1.. are VARIANCE_PARTS in order.
    let keep: Vec<usize> = (0..VARIANCE_PARTS.len())
        .filter(|&i| match VARIANCE_PARTS[i] {
            "lock_wait" => available[wait::LOCK],
            "lwlock_wait" => available[wait::LWLOCK],
            _ => true,
        })
        .collect();
    // Each series as a combination of the variables: a kept part, then
    // img_statement = elapsed − Σ kept parts.
    let mut series: Vec<(FnName, [f64; MOMENTS])> = keep
        .iter()
        .map(|&i| {
            let mut a = [0.0; MOMENTS];
            a[i + 1] = 1.0;
            (FnName::real(VARIANCE_PARTS[i]), a)
        })
        .collect();
    let mut img = [0.0; MOMENTS];
    img[0] = 1.0;
    for &i in &keep {
        img[i + 1] = -1.0;
    }
    series.push((FnName::img("statement"), img));
    let cov = |a: &[f64; MOMENTS], b: &[f64; MOMENTS]| {
        let mut s = 0.0;
        for i in 0..MOMENTS {
            for j in 0..MOMENTS {
                s += a[i] * b[j] * c[i][j];
            }
        }
        s
    };
    let mut terms = Vec::new();
    for (name, a) in &series {
        let v = cov(a, a);
        terms.push(VarianceTerm {
            term: format!("Var({name})"),
            value_ns2: v,
            share: v / root_var,
        });
    }
    for i in 0..series.len() {
        for j in i + 1..series.len() {
            let v = 2.0 * cov(&series[i].1, &series[j].1);
            terms.push(VarianceTerm {
                term: Term::cov(series[i].0.clone(), series[j].0.clone()).to_string(),
                value_ns2: v,
                share: v / root_var,
            });
        }
    }
    terms.sort_by(|a, b| b.share.total_cmp(&a.share));
    let explained_by = terms.first()?.term.clone();
    Some(Variance {
        variance_ns2: root_var,
        terms,
        explained_by,
    })
}

#[cfg(test)]
mod tests;
