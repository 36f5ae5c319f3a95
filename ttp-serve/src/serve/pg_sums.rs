//! `serve --postgres` from the sums the kernel keeps per statement key
//! (ttp-ebpf/src/sums.rs; docs/serve.md, "PostgreSQL statements"): at each
//! refresh the map is read once and what each key added since the last
//! read goes to its series. No statement crosses to serve; what it holds
//! is bounded by the kernel's keys (at most 4 096 and `other`): a key's
//! series, its last reading and its text.
//!
//! The latency buckets come from the kernel's log-linear histogram
//! (ttp_common::sums::bucket, 16 sub-buckets a power of two): each of its
//! buckets is counted under the first of serve's bounds at or above its
//! midpoint, so a statement is counted in the bucket of a value within
//! 3.1 % of its own (exactly where no bucket straddles a bound). The
//! kernel's counts are u32 a CPU and bucket: they are summed per CPU into
//! serve's buckets and differenced modulo 2^32, right as long as fewer
//! than 2^32 statements of one key land in one of serve's buckets on one
//! CPU between two refreshes.
use std::collections::HashMap;

use ttp_common::{
    statements::{part, wait},
    sums::{HIST_BUCKETS, SumKey, Sums, bucket_range, key_kind},
};

use crate::serve::statement_series::{BUCKETS, LATENCY_BOUNDS_NS, SeriesKey, StatementTotals};
use ttp_ledger::probe::statements::StatementProbes;
use ttp_statements::{fingerprint::fingerprint, session::SumsReader};

/// Refreshes a key whose text has not come yet is held back for before it
/// is counted without one.
const TEXT_WAIT_REFRESHES: u32 = 3;

/// Serve's bucket of each of the kernel's.
fn bucket_map() -> [u8; HIST_BUCKETS] {
    let mut m = [0u8; HIST_BUCKETS];
    for (i, b) in m.iter_mut().enumerate() {
        let (lo, w) = bucket_range(i);
        let mid = lo + w / 2;
        *b = LATENCY_BOUNDS_NS
            .iter()
            .position(|bound| mid <= *bound)
            .unwrap_or(BUCKETS - 1) as u8;
    }
    m
}

/// One key's counters as last read: the sums over CPUs, and serve's
/// buckets per CPU (modulo 2^32, as the kernel's are).
#[derive(Debug, Clone, Default)]
struct Reading {
    totals: StatementTotals,
    buckets: Vec<[u32; BUCKETS]>,
}

impl Reading {
    fn of(per_cpu: &[Sums], map: &[u8; HIST_BUCKETS]) -> Self {
        let mut t = StatementTotals::default();
        let mut buckets = vec![[0u32; BUCKETS]; per_cpu.len()];
        for (c, b) in per_cpu.iter().zip(&mut buckets) {
            t.calls += c.calls;
            t.elapsed_ns += c.elapsed_ns;
            t.on_cpu_ns += c.parts[part::ON_CPU];
            t.runq_wait_ns += c.parts[part::RUNQ];
            t.lock_wait_ns += c.waits_ns[wait::LOCK];
            t.iowait_ns += c.parts[part::IOWAIT];
            for (i, n) in c.hist.iter().enumerate() {
                if *n != 0 {
                    let j = usize::from(map[i]);
                    b[j] = b[j].wrapping_add(*n);
                }
            }
        }
        Self { totals: t, buckets }
    }

    /// What was added since `earlier` (the same key's last reading).
    fn since(&self, earlier: Option<&Reading>) -> StatementTotals {
        let Some(e) = earlier else {
            let mut t = self.totals;
            for b in &self.buckets {
                for (x, y) in t.buckets.iter_mut().zip(b) {
                    *x += u64::from(*y);
                }
            }
            return t;
        };
        let (a, b) = (&self.totals, &e.totals);
        let mut t = StatementTotals {
            calls: a.calls.saturating_sub(b.calls),
            elapsed_ns: a.elapsed_ns.saturating_sub(b.elapsed_ns),
            on_cpu_ns: a.on_cpu_ns.saturating_sub(b.on_cpu_ns),
            runq_wait_ns: a.runq_wait_ns.saturating_sub(b.runq_wait_ns),
            lock_wait_ns: a.lock_wait_ns.saturating_sub(b.lock_wait_ns),
            iowait_ns: a.iowait_ns.saturating_sub(b.iowait_ns),
            buckets: [0; BUCKETS],
        };
        for (now, then) in self.buckets.iter().zip(&e.buckets) {
            for ((x, n), p) in t.buckets.iter_mut().zip(now).zip(then) {
                *x += u64::from(n.wrapping_sub(*p));
            }
        }
        t
    }
}

/// What one refresh of the sums gives a server's series.
#[derive(Debug, Default)]
pub(crate) struct Increments {
    /// Per series, with a backend that ran one of its statements (to name
    /// its database and user).
    pub series: Vec<(SeriesKey, StatementTotals, u32)>,
    /// The kernel's `other` key: statements of keys its map had no room
    /// for.
    pub other: StatementTotals,
}

/// The sums of one attached server; see the module documentation.
#[derive(Debug)]
pub(crate) struct ServerSums {
    reader: SumsReader,
    last: HashMap<SumKey, Reading>,
    /// Each key's series, fixed once its text came.
    series_of: HashMap<SumKey, (SeriesKey, u32)>,
    /// Keys held back for their text, with the refreshes they waited.
    waiting: HashMap<SumKey, u32>,
    map: [u8; HIST_BUCKETS],
}

impl ServerSums {
    pub(crate) fn new() -> Self {
        Self {
            reader: SumsReader::default(),
            last: HashMap::new(),
            series_of: HashMap::new(),
            waiting: HashMap::new(),
            map: bucket_map(),
        }
    }

    /// Takes in the key texts sent since (every tick: the text ring is
    /// small).
    pub(crate) fn drain_texts(&mut self, sp: &mut StatementProbes) {
        self.reader.drain_texts(sp);
    }

    /// Reads the map: what each key added since the last read. `last`:
    /// the programs are about to be dropped, nothing is held back.
    pub(crate) fn read(&mut self, sp: &mut StatementProbes, last: bool) -> Increments {
        let mut now: Vec<(SumKey, Reading)> = Vec::new();
        let map = self.map;
        self.reader.read_with(sp, |key, per_cpu| {
            now.push((key, Reading::of(per_cpu, &map)))
        });
        let mut out = Increments::default();
        // The map's keys are never removed while the programs run: what is
        // kept is bounded by them.
        for (key, reading) in now {
            let d = reading.since(self.last.get(&key));
            if d.calls == 0 {
                self.last.insert(key, reading);
                continue;
            }
            if key.kind == key_kind::OTHER {
                out.other += d;
                self.last.insert(key, reading);
                continue;
            }
            let Some((series, tgid)) = self.series_key(&key, last) else {
                // Held back: its last reading stays, so nothing is lost.
                continue;
            };
            out.series.push((series, d, tgid));
            self.last.insert(key, reading);
        }
        out
    }

    /// The series of `key`: its database, user, query id and the
    /// fingerprint of its text. `None` while its text is awaited.
    fn series_key(&mut self, key: &SumKey, last: bool) -> Option<(SeriesKey, u32)> {
        if let Some(s) = self.series_of.get(key) {
            return Some(s.clone());
        }
        let texts = &self.reader.texts.0;
        let queryid = (key.kind == key_kind::QUERY_ID).then_some(key.id as i64);
        // A query id's text may have come under another database or user.
        let text = texts.get(key).or_else(|| {
            (key.kind == key_kind::QUERY_ID).then(|| {
                texts
                    .iter()
                    .find(|(k, _)| k.kind == key_kind::QUERY_ID && k.id == key.id)
                    .map(|(_, t)| t)
            })?
        });
        let (fp, tgid) = match text {
            Some(t) => (fingerprint(&t.text), t.tgid),
            None if key.kind == key_kind::NO_TEXT => (String::new(), 0),
            None => {
                let waited = self.waiting.entry(*key).or_default();
                *waited += 1;
                if !last && *waited <= TEXT_WAIT_REFRESHES {
                    return None;
                }
                (String::new(), 0)
            }
        };
        self.waiting.remove(key);
        let s = (
            SeriesKey {
                database: key.database,
                user: key.user,
                queryid,
                fingerprint: fp,
            },
            tgid,
        );
        self.series_of.insert(*key, s.clone());
        Some(s)
    }

    /// Reads of the map that failed, and the last error.
    pub(crate) fn read_errors(&self) -> (u64, Option<&str>) {
        (self.reader.read_errors, self.reader.last_error.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_common::sums::bucket;

    /// Catches a kernel bucket counted under a serve bucket whose bound
    /// is more than 3.1 % off the values it holds, and a histogram that
    /// does not cover every kernel bucket.
    #[test]
    fn kernel_buckets_land_within_their_width() {
        let m = bucket_map();
        for v in [
            1_000u64,
            49_000,
            50_000,
            51_000,
            99_999,
            100_000,
            2_400_000,
            9_000_000_000,
            20_000_000_000,
        ] {
            let j = usize::from(m[bucket(v)]);
            let exact = LATENCY_BOUNDS_NS
                .iter()
                .position(|b| v <= *b)
                .unwrap_or(BUCKETS - 1);
            if j != exact {
                // Only a value within 3.1 % of a bound may move across it.
                let bound = LATENCY_BOUNDS_NS[j.min(exact)] as f64;
                assert!(
                    (v as f64 - bound).abs() / bound <= 1.0 / 32.0,
                    "{v} ns in bucket {j}, exact {exact}"
                );
            }
        }
    }

    /// Catches buckets that go down or jump by 2^32 when a CPU's u32
    /// counter wraps between two readings.
    #[test]
    fn wrapped_kernel_counters_difference_modulo_2_32() {
        let a = Reading {
            totals: StatementTotals {
                calls: 10,
                ..Default::default()
            },
            buckets: vec![[u32::MAX - 1; BUCKETS]],
        };
        let b = Reading {
            totals: StatementTotals {
                calls: 15,
                ..Default::default()
            },
            buckets: vec![[3; BUCKETS]],
        };
        let d = b.since(Some(&a));
        assert_eq!(d.calls, 5);
        assert!(d.buckets.iter().all(|x| *x == 5), "{:?}", d.buckets);
    }
}
