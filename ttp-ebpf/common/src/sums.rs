//! `statements` summed in the kernel: at a statement's end (socket
//! boundaries, ttp-ebpf/src/wire.rs) its figures are added into a per-CPU
//! hash keyed by [`SumKey`] (the backend's database, user and statement
//! key), so that userspace reads a few keys on its interval instead of a
//! record a statement. The text of a key crosses to userspace once a key
//! and CPU ([`TextRecord`]), not once a statement.
//!
//! A [`Sums`] holds what every column of `statements` needs: calls and
//! the parts of the elapsed time; the sums and cross-products of the
//! disjoint split VProfiler's eq. 1 breaks the variance into (paper 004,
//! Sec. 3.1: Var(ΣX) = ΣVar(X) + 2ΣCov(X, Y), from Σx, Σxy and n); and a
//! log-linear latency histogram ([`bucket`]).
use crate::statements::{PARTS, TEXT_LEN, WAITS};

/// Sub-buckets per power of two of the latency histogram: a bucket spans
/// at most 1/16 of its lower bound, so its midpoint is within 1/32
/// (3.1 %) of every value in it: p50 and p99 within 5 %.
pub const HIST_SUB_BITS: u32 = 4;
pub const HIST_SUB: usize = 1 << HIST_SUB_BITS;
/// Buckets: exact below 16 ns, then 16 a power of two up to 2^42 ns
/// (73 minutes); longer statements land in the last bucket.
pub const HIST_BUCKETS: usize = 640;

/// The histogram bucket of `v` ns (log-linear, HdrHistogram's scheme with
/// [`HIST_SUB`] sub-buckets a power of two).
#[inline(always)]
pub const fn bucket(v: u64) -> usize {
    if v < HIST_SUB as u64 {
        return v as usize;
    }
    let k = ilog2(v);
    let sub = (v >> (k - HIST_SUB_BITS)) as usize & (HIST_SUB - 1);
    let i = (k - HIST_SUB_BITS + 1) as usize * HIST_SUB + sub;
    if i >= HIST_BUCKETS {
        HIST_BUCKETS - 1
    } else {
        i
    }
}

/// ⌊log2 v⌋ for v > 0, by halving (no count-leading-zeros instruction on
/// the BPF target).
#[inline(always)]
pub const fn ilog2(mut v: u64) -> u32 {
    let mut k = 0;
    if v >> 32 != 0 {
        v >>= 32;
        k += 32;
    }
    if v >> 16 != 0 {
        v >>= 16;
        k += 16;
    }
    if v >> 8 != 0 {
        v >>= 8;
        k += 8;
    }
    if v >> 4 != 0 {
        v >>= 4;
        k += 4;
    }
    if v >> 2 != 0 {
        v >>= 2;
        k += 2;
    }
    if v >> 1 != 0 {
        k += 1;
    }
    k
}

/// The lowest value of bucket `i` and its width.
pub const fn bucket_range(i: usize) -> (u64, u64) {
    if i < HIST_SUB {
        return (i as u64, 1);
    }
    let k = (i / HIST_SUB) as u32 + HIST_SUB_BITS - 1;
    let sub = (i % HIST_SUB) as u64;
    let width = 1u64 << (k - HIST_SUB_BITS);
    ((1u64 << k) + sub * width, width)
}

/// How the statement key is chosen (the loader's global `STMT_KEY_BY`).
pub mod key_by {
    /// The backend's query id (`st_query_id`) where it is not 0, else the
    /// text's fingerprint hash (`crate::fingerprint`), computed in the
    /// kernel.
    pub const QUERY: u32 = 0;
    /// A hash of the exact text (`--by text`).
    pub const TEXT: u32 = 1;
    /// The backend process (`--by backend`).
    pub const BACKEND: u32 = 2;
}

/// What [`SumKey::id`] is.
pub mod key_kind {
    /// PostgreSQL's query id, equal to pg_stat_statements' `queryid`.
    pub const QUERY_ID: u32 = 1;
    /// A hash of the text's bytes ([`super::text_hash`]).
    pub const TEXT: u32 = 2;
    /// The backend's pid.
    pub const BACKEND: u32 = 3;
    /// No status entry: no text, no query id (the reply's bytes ended
    /// the statement).
    pub const NO_TEXT: u32 = 4;
    /// The map was full: every statement of a new key lands here
    /// (inserted by userspace before the programs run).
    pub const OTHER: u32 = 5;
    /// The fingerprint hash of the text (`crate::fingerprint::hash`),
    /// where the backend had no query id.
    pub const FINGERPRINT: u32 = 6;
}

/// A statement key of one backend's database and user.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SumKey {
    pub database: u32,
    pub user: u32,
    pub id: u64,
    /// See [`key_kind`].
    pub kind: u32,
    pub _pad: u32,
}

/// Variables of the variance split, in this order: the elapsed time, then
/// on-CPU, run-queue wait, iowait, lock wait, LWLock wait, other sleep
/// (`VARIANCE_PARTS` in ttp-statements).
pub const MOMENTS: usize = 7;
/// Cross-products `x_i · x_j` for `i <= j` (row-major upper triangle).
pub const PRODUCTS: usize = MOMENTS * (MOMENTS + 1) / 2;
/// The moments are kept in units of 16 ns, each value capped at
/// `u32::MAX` units (68.7 s): a product then fits a u64, and the sums of
/// products are kept in 128 bits (`[lo, hi]`).
pub const MOMENT_SHIFT: u32 = 4;

/// The index of the product `x_i · x_j` (`i <= j`) in [`Sums::products`].
pub const fn product_index(i: usize, j: usize) -> usize {
    i * MOMENTS - i * (i + 1) / 2 + j
}

/// Plan ids (PostgreSQL 18's `st_plan_id`) kept a key and CPU, each with
/// its calls; a statement whose plan id finds no free slot is counted in
/// [`Sums::plans_other`].
pub const PLAN_SLOTS: usize = 4;

/// Bits of [`Sums::flags`].
pub mod sums_flag {
    /// The text of this key was sent from this CPU.
    pub const TEXT_SENT: u64 = 1;
}

/// One key's sums on one CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Sums {
    pub calls: u64,
    /// Statements whose reply carried an error (plain-text connections).
    pub errors: u64,
    /// Statements of the extended query protocol.
    pub extended: u64,
    /// Statements the ledger had no account for.
    pub without_account: u64,
    /// See [`sums_flag`].
    pub flags: u64,
    pub elapsed_ns: u64,
    pub max_ns: u64,
    /// The parts as the groups read them (`socket_parts`), see
    /// `statements::part`.
    pub parts: [u64; PARTS],
    pub waits_ns: [u64; WAITS],
    pub waits: [u64; WAITS],
    /// Σx of each variable of the variance split, in 16 ns units.
    pub moments: [u64; MOMENTS],
    /// Σx_i·x_j, 128 bits as `[lo, hi]`.
    pub products: [[u64; 2]; PRODUCTS],
    /// Parallel workers: statements with at least one, shares, shares
    /// without a ledger account, their summed elapsed time and parts.
    pub with_workers: u64,
    pub workers: u64,
    pub workers_without_account: u64,
    pub workers_elapsed_ns: u64,
    pub workers_parts: [u64; PARTS],
    /// PostgreSQL 18's plan ids seen at the statements' ends (not 0: an
    /// extension such as pg_stat_plans computed one), each with the
    /// statements that ended with it; 0 marks a free slot.
    pub plan_ids: [u64; PLAN_SLOTS],
    pub plan_calls: [u64; PLAN_SLOTS],
    /// Statements with a plan id beyond the slots.
    pub plans_other: u64,
    /// Latency histogram, see [`bucket`].
    pub hist: [u32; HIST_BUCKETS],
}

/// The text of a key, sent the first time the key ends a statement on a
/// CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TextRecord {
    pub key: SumKey,
    /// A backend that ran it (names its database and user in serve).
    pub tgid: u32,
    /// Bytes of `text` in use, or [`crate::statements::TEXT_UNTERMINATED`].
    pub text_len: u32,
    pub text: [u8; TEXT_LEN],
}

/// The hash a text is keyed by when it has no query id: FNV-1a over its
/// 8-byte words up to its NUL (the bytes after the NUL masked off: the
/// server's buffer keeps an earlier, longer text's tail there).
#[inline(always)]
pub fn text_word_hash(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(0x0000_0100_0000_01b3)
}

/// FNV-1a's offset basis.
pub const TEXT_HASH_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// `w` with the bytes from its first NUL on masked off, and whether it
/// held a NUL (little-endian: the first byte is the lowest).
#[inline(always)]
pub fn until_nul(w: u64) -> (u64, bool) {
    const LOW: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let z = w.wrapping_sub(LOW) & !w & HIGH;
    if z == 0 {
        return (w, false);
    }
    // The lowest flagged byte is the first NUL (flags above a true NUL
    // may be false, the lowest never is).
    let low = z & z.wrapping_neg();
    (w & ((low >> 7).wrapping_sub(1)), true)
}

/// Words of a text the hash reads at most.
pub const TEXT_WORDS: usize = TEXT_LEN / 8;

/// The hash of `text`'s bytes up to its first NUL (at most [`TEXT_LEN`]
/// bytes), as the program computes it from its [`TEXT_LEN`]-byte copy.
pub fn text_hash(text: &[u8]) -> u64 {
    let mut buf = [0u8; TEXT_LEN];
    let n = text.len().min(TEXT_LEN);
    buf[..n].copy_from_slice(&text[..n]);
    let mut h = TEXT_HASH_SEED;
    for c in buf.chunks(8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        let (w, end) = until_nul(u64::from_le_bytes(b));
        h = text_word_hash(h, w);
        if end {
            break;
        }
    }
    h
}

#[cfg(feature = "user")]
unsafe impl aya::Pod for SumKey {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for Sums {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for TextRecord {}

const _: () = assert!(core::mem::size_of::<SumKey>() == 24);
const _: () = assert!(
    core::mem::size_of::<Sums>()
        == 8 * (7 + 2 * PARTS + 2 * WAITS + MOMENTS + 2 * PRODUCTS + 4 + 2 * PLAN_SLOTS + 1)
            + 4 * HIST_BUCKETS
);
const _: () = assert!(core::mem::size_of::<TextRecord>() == 24 + 8 + TEXT_LEN);

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a gap or an overlap between buckets, and a bucket wider
    /// than 1/16 of its lower bound (the 5 % bound on percentiles).
    #[test]
    fn buckets_are_contiguous_and_fine() {
        let mut next = 0u64;
        for i in 0..HIST_BUCKETS - 1 {
            let (lo, w) = bucket_range(i);
            assert_eq!(lo, next, "bucket {i}");
            assert!(i < HIST_SUB || w * 16 <= lo, "bucket {i}: {lo} + {w}");
            assert_eq!(bucket(lo), i);
            assert_eq!(bucket(lo + w - 1), i);
            next = lo + w;
        }
        assert_eq!(bucket(u64::MAX), HIST_BUCKETS - 1);
    }

    /// Catches the tail after a NUL entering the hash, and a wrong word
    /// split.
    #[test]
    fn hash_stops_at_nul() {
        let mut a = *b"select 1\0abcdefgh_______";
        let h = text_hash(&a);
        a[10] = b'z';
        assert_eq!(text_hash(&a), h);
        assert_ne!(text_hash(b"select 2\0"), h);
        assert_eq!(text_hash(b"select 1"), text_hash(b"select 1\0\0\0"));
        assert_eq!(product_index(0, 0), 0);
        assert_eq!(product_index(0, 6), 6);
        assert_eq!(product_index(1, 1), 7);
        assert_eq!(product_index(6, 6), PRODUCTS - 1);
    }
}
