//! The rows of a [`RunningWindow`](super::RunningWindow) in memory reserved
//! when the window opens: a slab of rows with a free list, and an index from
//! tgid to its newest process instance, each row linking to the previous
//! instance of its tgid (a pid the kernel handed out twice).
//!
//! Every page of the slab and of the index is written when the store is
//! made, so a window that keeps `keep_exited` rows of ended processes has
//! its resident memory at the start, not growing while the rows fill over
//! an hour (docs/attach.md, "Memory of a long run"). Rows come back to the
//! free list when the window folds them into command groups. Only more live
//! processes than the reserve (which also has room for the processes alive
//! at the start) make it grow.
use std::collections::HashMap;

use super::{image::ProcessDelta, keys::ProcKey};

const NIL: u32 = u32::MAX;

/// One process instance's row.
#[derive(Debug, Clone, Default)]
pub(crate) struct Row {
    pub key: ProcKey,
    /// Its measures; `delta.comm` stays empty here (no allocation per row):
    /// the name is `comm` until [`Rows::into_sorted`].
    pub delta: ProcessDelta,
    pub comm: [u8; 16],
    /// Slot of the previous (older) instance of the same tgid, or `NIL`.
    prev: u32,
    used: bool,
}

impl Row {
    /// The command name as text.
    pub(crate) fn comm_str(&self) -> String {
        let end = self.comm.iter().position(|&b| b == 0).unwrap_or(16);
        String::from_utf8_lossy(&self.comm[..end]).into_owned()
    }
}

/// The rows, by process instance.
#[derive(Debug)]
pub(crate) struct Rows {
    slab: Vec<Row>,
    free: Vec<u32>,
    /// tgid → slot of its newest instance.
    newest: HashMap<u32, u32>,
}

impl Rows {
    /// A store with room for `n` rows, every page of it written now.
    pub(crate) fn with_capacity(n: usize) -> Self {
        let slab = vec![Row::default(); n];
        let free: Vec<u32> = (0..n as u32).rev().collect();
        let mut newest = HashMap::with_capacity(n);
        // Writes every bucket (the table does not grow below its capacity),
        // then empties it: the memory stays the table's.
        for k in 0..newest.capacity() as u32 {
            newest.insert(k, k);
        }
        newest.clear();
        Self { slab, free, newest }
    }

    /// Rows in use.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slab.len() - self.free.len()
    }

    pub(crate) fn has_tgid(&self, tgid: u32) -> bool {
        self.newest.contains_key(&tgid)
    }

    /// Slots of `tgid`'s instances, newest first.
    fn chain(&self, tgid: u32) -> impl Iterator<Item = u32> + '_ {
        let mut cur = self.newest.get(&tgid).copied().unwrap_or(NIL);
        std::iter::from_fn(move || {
            (cur != NIL).then(|| {
                let s = cur;
                cur = self.slab[s as usize].prev;
                s
            })
        })
    }

    /// The newest instance of `tgid` whose leader started at or before
    /// `bound`.
    pub(crate) fn latest_at_or_before(&self, tgid: u32, bound: u64) -> Option<ProcKey> {
        self.chain(tgid)
            .map(|s| self.slab[s as usize].key)
            .find(|k| k.start_ns <= bound)
    }

    /// The row of `key`, made (empty, `delta.tgid` set) if there is none.
    pub(crate) fn get_or_insert(&mut self, key: ProcKey) -> &mut Row {
        let found = self
            .chain(key.tgid)
            .find(|&s| self.slab[s as usize].key == key);
        if let Some(s) = found {
            return &mut self.slab[s as usize];
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slab.push(Row::default());
                (self.slab.len() - 1) as u32
            }
        };
        // Link it in, newest first.
        let head = self.newest.get(&key.tgid).copied().unwrap_or(NIL);
        let prev = if head == NIL || self.slab[head as usize].key.start_ns < key.start_ns {
            self.newest.insert(key.tgid, slot);
            head
        } else {
            let mut cur = head;
            loop {
                let p = self.slab[cur as usize].prev;
                if p == NIL || self.slab[p as usize].key.start_ns < key.start_ns {
                    self.slab[cur as usize].prev = slot;
                    break p;
                }
                cur = p;
            }
        };
        let r = &mut self.slab[slot as usize];
        r.key = key;
        r.prev = prev;
        r.used = true;
        r.delta.tgid = key.tgid;
        r
    }

    /// Takes the row of `key` out; its slot is free again.
    pub(crate) fn remove(&mut self, key: ProcKey) -> Option<Row> {
        let mut before = NIL;
        let mut slot = NIL;
        for s in self.chain(key.tgid) {
            if self.slab[s as usize].key == key {
                slot = s;
                break;
            }
            before = s;
        }
        if slot == NIL {
            return None;
        }
        let prev = self.slab[slot as usize].prev;
        if before == NIL {
            if prev == NIL {
                self.newest.remove(&key.tgid);
            } else {
                self.newest.insert(key.tgid, prev);
            }
        } else {
            self.slab[before as usize].prev = prev;
        }
        self.free.push(slot);
        Some(std::mem::take(&mut self.slab[slot as usize]))
    }

    /// The rows in use, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Row> {
        self.slab.iter().filter(|r| r.used)
    }

    /// Every row, named, in key order.
    pub(crate) fn into_sorted(self) -> Vec<(ProcKey, ProcessDelta)> {
        let mut out: Vec<(ProcKey, ProcessDelta)> = self
            .slab
            .into_iter()
            .filter(|r| r.used)
            .map(|r| {
                let comm = r.comm_str();
                let mut d = r.delta;
                d.comm = comm;
                (r.key, d)
            })
            .collect();
        out.sort_unstable_by_key(|(k, _)| *k);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(tgid: u32, start_ns: u64) -> ProcKey {
        ProcKey { tgid, start_ns }
    }

    /// Instances of one tgid inserted out of order are found newest first,
    /// removal from the head, middle and tail keeps the rest findable, and
    /// freed slots are reused before the slab grows.
    #[test]
    fn instances_of_a_tgid_stay_ordered_through_removals() {
        let mut r = Rows::with_capacity(4);
        for s in [200, 100, 300, 50] {
            r.get_or_insert(k(7, s)).delta.threads = s as u32;
        }
        assert_eq!(r.len(), 4);
        assert_eq!(r.latest_at_or_before(7, 250), Some(k(7, 200)));
        assert_eq!(r.latest_at_or_before(7, u64::MAX), Some(k(7, 300)));
        assert_eq!(r.latest_at_or_before(7, 49), None);
        assert_eq!(r.get_or_insert(k(7, 100)).delta.threads, 100);
        assert_eq!(r.remove(k(7, 200)).map(|x| x.delta.threads), Some(200));
        assert_eq!(r.latest_at_or_before(7, 250), Some(k(7, 100)));
        assert_eq!(r.remove(k(7, 300)).map(|x| x.key), Some(k(7, 300)));
        assert_eq!(r.latest_at_or_before(7, u64::MAX), Some(k(7, 100)));
        assert_eq!(r.remove(k(7, 50)).map(|x| x.key), Some(k(7, 50)));
        assert!(r.remove(k(7, 50)).is_none());
        assert!(r.has_tgid(7));
        r.get_or_insert(k(8, 1));
        r.get_or_insert(k(9, 1));
        r.get_or_insert(k(10, 1));
        assert_eq!(r.slab.len(), 4, "freed slots are reused");
        r.get_or_insert(k(11, 1));
        assert_eq!(r.slab.len(), 5, "beyond the reserve it grows");
        assert!(r.remove(k(7, 100)).is_some());
        assert!(!r.has_tgid(7));
        let keys: Vec<ProcKey> = r.into_sorted().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, vec![k(8, 1), k(9, 1), k(10, 1), k(11, 1)]);
    }
}
