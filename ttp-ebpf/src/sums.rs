//! `statements` summed in the kernel (ttp_common::sums): at a statement's
//! end at the socket (wire.rs) its figures go into this CPU's sums of its
//! key, and its text goes to userspace only the first time the key ends a
//! statement on this CPU. Userspace reads the map on its interval; a
//! record a statement (`STMT_RECORDS`) is sent only with `--each`.
use aya_ebpf::{
    cty::c_void,
    helpers::{bpf_probe_read_user_buf, bpf_probe_read_user_str_bytes, generated::bpf_loop},
    macros::map,
    maps::{PerCpuArray, PerCpuHashMap, RingBuf},
};
use ttp_common::{
    fingerprint::{FP_STEPS, Fp},
    statements::{PARTS, TEXT_LEN, TEXT_UNTERMINATED, WAITS, flag, part, wait},
    sums::{
        HIST_BUCKETS, MOMENT_SHIFT, MOMENTS, PLAN_SLOTS, SumKey, Sums, TEXT_HASH_SEED, TEXT_WORDS,
        TextRecord, bucket, key_by, key_kind, product_index, sums_flag, text_word_hash, until_nul,
    },
};

use crate::statements::{StmtState, stats};

/// Keys summed at once (database, user, statement); a statement of a new
/// key beyond them is summed under the `other` key. The loader sets the
/// bound from the CPUs (ttp-ledger's `statements::sum_keys`). The entries
/// are preallocated: an insert into a map that allocates on demand fails
/// while its per-CPU free list waits for a refill (seen: the first
/// statements of new keys under load), and a statement would then land in
/// `other`.
const MAX_KEYS: u32 = 4096;
/// `bpf_map_update_elem`'s flag: insert only.
const BPF_NOEXIST: u64 = 1;
/// Ring of key texts (288 B each). Its size is set at load to hold a
/// text of every key from every CPU (ttp-ledger's `text_ring_bytes`), so
/// it cannot overflow; a text that still finds no room is sent at the
/// key's next statement on that CPU (counted).
const TEXT_RING_BYTES: u32 = 1 << 20;

/// How the statement key is chosen, see [`key_by`] (set by the loader).
#[unsafe(no_mangle)]
static STMT_KEY_BY: u32 = 0;
/// 0: no sums (a reader of the records alone, serve: its statements are
/// not paid for twice).
#[unsafe(no_mangle)]
static STMT_SUMS_ON: u32 = 1;
/// 1: a statement without a query id is keyed by its fingerprint,
/// computed here; 0 (a server known to compute query ids, where a
/// statement without one is rare): by the hash of its text, which
/// userspace groups by the same fingerprint. With 0 the verifier drops
/// the fingerprint machine, most of this program's verification.
#[unsafe(no_mangle)]
static STMT_FINGERPRINT: u32 = 1;

#[map]
static STMT_SUMS: PerCpuHashMap<SumKey, Sums> = PerCpuHashMap::with_max_entries(MAX_KEYS, 0);

#[map]
static STMT_TEXTS: RingBuf = RingBuf::with_byte_size(TEXT_RING_BYTES, 0);

/// A zeroed value for a new key (too large for the BPF stack).
#[map]
static SUMS_SCRATCH: PerCpuArray<Sums> = PerCpuArray::with_max_entries(1, 0);

/// The text read for a key, before it is hashed or sent.
#[map]
static TEXT_SCRATCH: PerCpuArray<TextRecord> = PerCpuArray::with_max_entries(1, 0);

/// The fingerprint machine and the text it reads (`FP_LEN` bytes).
#[map]
static FP_SCRATCH: PerCpuArray<Fp> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn global(v: &'static u32) -> u32 {
    // SAFETY: a plain read of a global the loader wrote before load.
    unsafe { core::ptr::read_volatile(v) }
}

/// Whether the statements are summed.
#[inline(always)]
pub(crate) fn on() -> bool {
    global(&STMT_SUMS_ON) != 0
}

/// What wire.rs knows of a statement at its end.
pub(crate) struct Ended<'a> {
    pub tgid: u32,
    pub st: &'a StmtState,
    pub elapsed_ns: u64,
    /// The counters' differences over the statement.
    pub diff: &'a [u64; PARTS],
    pub switches: u32,
    pub flags: u32,
    /// From the status entry: database, user, query id, text's address.
    pub entry: Option<(u32, u32, u64, u64)>,
    /// PostgreSQL 18's `st_plan_id` (0: none, or no status entry).
    pub plan_id: u64,
}

/// The parts as the groups read them: with the ledger as measured; at the
/// socket without it, on-CPU is the elapsed time of a statement that was
/// never switched out, iowait is delay accounting's, and the rest of the
/// elapsed time is sleep (`socket_parts` in ttp-statements
/// does the same for a record).
#[inline(always)]
fn parts(e: &Ended, out: &mut [u64; PARTS]) {
    // SAFETY: two [u64; PARTS] arrays that do not overlap.
    unsafe { crate::words::copy(out as *mut _, e.diff as *const _) };
    if e.flags & flag::NO_ACCOUNT == 0 {
        return;
    }
    if e.switches == 0 {
        out[part::ON_CPU] = e.elapsed_ns;
    }
    out[part::IOWAIT] = if e.flags & flag::NO_BLKIO == 0 {
        out[part::BLKIO]
    } else {
        0
    };
    out[part::SLEEP] = e
        .elapsed_ns
        .saturating_sub(out[part::ON_CPU] + out[part::RUNQ] + out[part::IOWAIT]);
    out[part::BLOCKED] = 0;
}

/// Reads the statement's text at `addr` into this CPU's scratch record;
/// whether it was read.
#[inline(always)]
fn read_text(addr: u64, rec: &mut TextRecord) -> bool {
    let p = addr as *const u8;
    // One fixed-size copy (a string copy costs ~4× as much); near the end
    // of a mapping it fails, then the string copy.
    // SAFETY: user-memory reads into the scratch record; a bad address
    // fails.
    if unsafe { bpf_probe_read_user_buf(p, &mut rec.text) }.is_ok() {
        rec.text_len = TEXT_UNTERMINATED;
        return true;
    }
    match unsafe { bpf_probe_read_user_str_bytes(p, &mut rec.text) } {
        Ok(t) => {
            rec.text_len = t.len() as u32;
            true
        }
        Err(_) => false,
    }
}

/// The hash of the scratch text up to its NUL (ttp_common::sums::text_hash
/// computes the same in userspace): at most [`TEXT_WORDS`] words.
#[inline(always)]
fn hash_text(rec: &TextRecord) -> u64 {
    let words = rec.text.as_ptr() as *const u64;
    let mut h = TEXT_HASH_SEED;
    for i in 0..TEXT_WORDS {
        // SAFETY: word i < TEXT_WORDS of the 8-aligned text array.
        let (w, end) = until_nul(unsafe { core::ptr::read_volatile(words.add(i)) });
        h = text_word_hash(h, w);
        if end {
            break;
        }
    }
    h
}

/// Steps of the fingerprint machine a `bpf_loop` iteration runs: the
/// machine's fields stay in registers across them, and the call is paid
/// once for them all.
const FP_UNROLL: u32 = 4;

/// [`FP_UNROLL`] steps of the fingerprint machine, `bpf_loop`'s callback:
/// 1 ends the loop.
unsafe extern "C" fn fp_step(_index: u64, _ctx: *mut c_void) -> i64 {
    let Some(fp) = FP_SCRATCH.get_ptr_mut(0) else {
        return 1;
    };
    // SAFETY: this CPU's machine; only this program run uses it.
    let fp = unsafe { &mut *fp };
    for _ in 0..FP_UNROLL {
        if fp.step() {
            return 1;
        }
    }
    0
}

/// The fingerprint hash of the text at `addr` (ttp_common::fingerprint:
/// the hash of `fingerprint()`'s bytes), its first [`TEXT_LEN`] bytes
/// copied into `rec` for a key text; `None` if it could not be read.
#[inline(always)]
fn fingerprint_text(addr: u64, rec: &mut TextRecord) -> Option<u64> {
    let fp = FP_SCRATCH.get_ptr_mut(0)?;
    // SAFETY: this CPU's machine.
    let fp = unsafe { &mut *fp };
    let p = addr as *const u8;
    // As `read_text`: one fixed-size copy, else a string copy.
    // SAFETY: user-memory reads into the map value; a bad address fails.
    if unsafe { bpf_probe_read_user_buf(p, &mut fp.text) }.is_err()
        && unsafe { bpf_probe_read_user_str_bytes(p, &mut fp.text) }.is_err()
    {
        return None;
    }
    fp.reset();
    // The steps run in a helper's loop: the verifier checks one step, not
    // each of up to FP_STEPS.
    // SAFETY: a callback of bpf_loop's signature, no context.
    unsafe {
        bpf_loop(
            FP_STEPS.div_ceil(FP_UNROLL),
            fp_step as *mut c_void,
            core::ptr::null_mut(),
            0,
        )
    };
    // SAFETY: the machine's first TEXT_LEN bytes and the record's text,
    // both 8-aligned in map values.
    unsafe {
        crate::words::copy(
            rec.text.as_mut_ptr() as *mut [u64; TEXT_WORDS],
            fp.text.as_ptr() as *const [u64; TEXT_WORDS],
        )
    };
    rec.text_len = TEXT_UNTERMINATED;
    Some(fp.h)
}

/// This CPU's scratch text record. Looked up only where a text is read:
/// most statements end without one (their key has a query id and its text
/// was sent), and each map a run touches is a cold cache line or two after
/// the statement's own work (docs/benchmarks.md, "Where a statement's end
/// spends its time").
#[inline(always)]
fn text_scratch() -> Option<&'static mut TextRecord> {
    // SAFETY: this CPU's scratch record; only this program run uses it.
    TEXT_SCRATCH.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

/// This CPU's sums of `key`, the key created if new; `None` when the map
/// is full.
#[inline(always)]
fn slot(key: &SumKey) -> Option<&'static mut Sums> {
    if let Some(p) = STMT_SUMS.get_ptr_mut(key) {
        // SAFETY: this CPU's value; only programs on this CPU write it.
        return Some(unsafe { &mut *p });
    }
    let z = SUMS_SCRATCH.get_ptr_mut(0)?;
    // SAFETY: this CPU's scratch value, 8-aligned.
    unsafe { crate::words::zero(z) };
    // A key another CPU inserted meanwhile fails here and is found below.
    // By reference: a copy of the value would not fit the BPF stack.
    // SAFETY: the scratch value, fully written above.
    #[allow(clippy::needless_borrows_for_generic_args)]
    let _ = STMT_SUMS.insert(key, unsafe { &*z }, BPF_NOEXIST);
    // SAFETY: as above.
    STMT_SUMS.get_ptr_mut(key).map(|p| unsafe { &mut *p })
}

/// 128-bit `acc += p`, as `[lo, hi]`.
#[inline(always)]
fn add128(acc: &mut [u64; 2], p: u64) {
    let lo = acc[0].wrapping_add(p);
    if lo < p {
        acc[1] += 1;
    }
    acc[0] = lo;
}

/// Counts a statement's plan id in its key's slots: the slot that holds
/// it, else the first free one, else `plans_other`.
#[inline(always)]
fn add_plan(sums: &mut Sums, plan_id: u64) {
    for i in 0..PLAN_SLOTS {
        if sums.plan_ids[i] == plan_id {
            sums.plan_calls[i] += 1;
            return;
        }
        if sums.plan_ids[i] == 0 {
            sums.plan_ids[i] = plan_id;
            sums.plan_calls[i] = 1;
            return;
        }
    }
    sums.plans_other += 1;
}

/// Adds the statement that just ended into its key's sums; sends the key's
/// text if this CPU has not sent it yet.
#[inline(always)]
pub(crate) fn add(e: &Ended) {
    let mut key = SumKey::default();
    let mut have_text = false;
    match e.entry {
        None => key.kind = key_kind::NO_TEXT,
        Some((database, user, query_id, text)) => {
            key.database = database;
            key.user = user;
            let by = global(&STMT_KEY_BY);
            if by == key_by::BACKEND {
                key.kind = key_kind::BACKEND;
                key.id = u64::from(e.tgid);
            } else if by == key_by::QUERY && query_id != 0 {
                key.kind = key_kind::QUERY_ID;
                key.id = query_id;
            } else if by == key_by::QUERY && global(&STMT_FINGERPRINT) != 0 {
                // No query id: the fingerprint, computed here.
                key.kind = key_kind::FINGERPRINT;
                match text_scratch().and_then(|rec| fingerprint_text(text, rec)) {
                    Some(h) => {
                        have_text = true;
                        key.id = h;
                    }
                    None => key.id = 0,
                }
            } else {
                key.kind = key_kind::TEXT;
                if let Some(rec) = text_scratch()
                    && read_text(text, rec)
                {
                    have_text = true;
                    key.id = hash_text(rec);
                }
            }
        }
    }
    let s = stats();
    let sums = match slot(&key) {
        Some(v) => v,
        None => {
            if let Some(s) = stats() {
                s.sums_other += 1;
            }
            key = SumKey {
                kind: key_kind::OTHER,
                ..SumKey::default()
            };
            match slot(&key) {
                Some(v) => v,
                None => return,
            }
        }
    };
    if let Some(s) = s {
        s.statements += 1;
    }
    let mut p = core::mem::MaybeUninit::uninit();
    let p = crate::words::zeroed_words::<PARTS>(&mut p);
    parts(e, p);
    let st = e.st;
    sums.calls += 1;
    sums.errors += u64::from(e.flags & flag::ERROR != 0);
    sums.extended += u64::from(
        u8::try_from(st.opened_by)
            .is_ok_and(|b| matches!(b, b'P' | b'B' | b'E' | b'D' | b'C' | b'S' | b'H')),
    );
    sums.without_account += u64::from(e.flags & flag::NO_ACCOUNT != 0);
    sums.elapsed_ns += e.elapsed_ns;
    if e.elapsed_ns > sums.max_ns {
        sums.max_ns = e.elapsed_ns;
    }
    for (s, v) in sums.parts.iter_mut().zip(p.iter()) {
        *s += *v;
    }
    for i in 0..WAITS {
        sums.waits_ns[i] += st.waits_ns[i];
        sums.waits[i] += u64::from(st.waits[i]);
    }
    // The disjoint split of eq. 1 (VARIANCE_PARTS): heavyweight and
    // LWLock waits are sleeps, so they come out of sleep + blocked.
    let (lock, lw) = (st.waits_ns[wait::LOCK], st.waits_ns[wait::LWLOCK]);
    let x = [
        e.elapsed_ns,
        p[part::ON_CPU],
        p[part::RUNQ],
        p[part::IOWAIT],
        lock,
        lw,
        (p[part::SLEEP] + p[part::BLOCKED]).saturating_sub(lock + lw),
    ];
    let mut u = [0u64; MOMENTS];
    for i in 0..MOMENTS {
        let v = x[i] >> MOMENT_SHIFT;
        u[i] = if v > u64::from(u32::MAX) {
            u64::from(u32::MAX)
        } else {
            v
        };
        sums.moments[i] += u[i];
    }
    for i in 0..MOMENTS {
        for j in i..MOMENTS {
            add128(&mut sums.products[product_index(i, j)], u[i] * u[j]);
        }
    }
    let b = bucket(e.elapsed_ns);
    if b < HIST_BUCKETS {
        sums.hist[b] += 1;
    }
    if e.plan_id != 0 {
        add_plan(sums, e.plan_id);
    }
    if st.workers > 0 {
        sums.with_workers += 1;
        sums.workers += u64::from(st.workers);
        sums.workers_without_account += u64::from(st.workers_without_account);
        sums.workers_elapsed_ns += st.workers_elapsed_ns;
        for (s, v) in sums.workers_parts.iter_mut().zip(st.workers_parts.iter()) {
            *s += *v;
        }
    }
    if sums.flags & sums_flag::TEXT_SENT != 0 || key.kind == key_kind::OTHER {
        return;
    }
    let Some((_, _, _, text)) = e.entry else {
        sums.flags |= sums_flag::TEXT_SENT;
        return;
    };
    let Some(rec) = text_scratch() else { return };
    if !have_text && !read_text(text, rec) {
        return;
    }
    rec.key = key;
    rec.tgid = e.tgid;
    let sent = crate::ring::emit::<TextRecord>(&STMT_TEXTS, |r| {
        // SAFETY: reserved ring memory of a TextRecord; every word copied.
        unsafe { crate::words::copy(r, rec as *const TextRecord) }
    });
    if sent {
        sums.flags |= sums_flag::TEXT_SENT;
    } else if let Some(s) = stats() {
        s.texts_lost += 1;
    }
}

/// Bytes of a text kept per key (the NUL included).
const _: () = assert!(TEXT_LEN == TEXT_WORDS * 8);
