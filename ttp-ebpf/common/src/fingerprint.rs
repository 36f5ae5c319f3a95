//! The statement fingerprint as a hash, computed a byte at a time by a
//! state machine, so that the kernel can key a statement's sums by it
//! where the server computes no query id (ttp-ebpf/src/sums.rs), and
//! userspace can check it against its own fingerprint.
//!
//! [`Fp::step`] consumes the text of [`Fp::text`] and feeds the bytes
//! that ttp-statements' `fingerprint()` would write into FNV-1a: the hash
//! of a text equals [`string_hash`] of its fingerprint, so two texts share
//! a hash exactly when they share a fingerprint (up to 64-bit collisions).
//! The rule, token by token, is the one `fingerprint()` documents
//! (literals and parameters become `$1`, `$2`, …, a unary minus folds into
//! its number, comments go, white space runs become one space, unquoted
//! words are lower-cased, quoted identifiers stay, trailing `;` and
//! spaces go).
//!
//! A step reads the byte at [`Fp::i`] and at most two bytes around it, and
//! either consumes it or changes state; every state but [`state::NORMAL`]
//! consumes or hands back within one step, so a text of `n` bytes takes at
//! most ~3n steps ([`FP_STEPS`] bounds them for [`FP_LEN`] bytes). In the
//! kernel, `bpf_loop` runs the steps: the verifier checks one step, not
//! every iteration.
//!
//! Streaming needs two hashes: trailing `;` and spaces are dropped at the
//! end, so such bytes go into [`Fp::t`] only, and [`Fp::h`] catches up with
//! `t` at the next other byte.

/// Bytes of a statement's text (`st_activity_raw`) the kernel reads and
/// fingerprints: PostgreSQL's default `track_activity_query_size`. A
/// longer text is fingerprinted by its first [`FP_LEN`] bytes.
pub const FP_LEN: usize = 1024;
const MASK: usize = FP_LEN - 1;
const _: () = assert!(FP_LEN.is_power_of_two());

/// Steps that finish any text of at most [`FP_LEN`] bytes: a byte is
/// consumed at most twice, plus a dollar tag's bytes once more when the
/// tag turns out not to open a string, plus the end.
pub const FP_STEPS: u32 = 3 * FP_LEN as u32 + 8;

/// FNV-1a's offset basis and prime.
pub const FNV_SEED: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// What the machine is inside of.
pub mod state {
    pub const NORMAL: u32 = 0;
    pub const LINE_COMMENT: u32 = 1;
    pub const BLOCK_COMMENT: u32 = 2;
    /// A single-quoted string (escapes: [`super::flag::ESCAPES`]).
    pub const QUOTE: u32 = 3;
    /// A double-quoted identifier (kept as written).
    pub const QIDENT: u32 = 4;
    /// The digits of `$n`.
    pub const PARAM: u32 = 5;
    /// After a `$`: a dollar quote's tag, or not.
    pub const DOLLAR_TAG: u32 = 6;
    /// Inside a `$tag$…$tag$` string.
    pub const DOLLAR_BODY: u32 = 7;
    /// Inside the body, matching a closing `$tag$`.
    pub const DOLLAR_CLOSE: u32 = 8;
    pub const NUMBER: u32 = 9;
    pub const EXPONENT: u32 = 10;
    pub const WORD: u32 = 11;
    pub const DONE: u32 = 12;
}

/// Bits of [`Fp::flags`].
pub mod flag {
    /// The previous token is an operand: a `-` here is binary.
    pub const AFTER_OPERAND: u32 = 1;
    /// White space or a comment since the last token.
    pub const PENDING_SPACE: u32 = 2;
    /// Something was written.
    pub const ANY: u32 = 4;
    /// The open string takes backslash escapes (`E'…'`).
    pub const ESCAPES: u32 = 8;
}

/// Words after which a `-` is unary (a subset of SQL's reserved words
/// that precede expressions; ttp-statements' `fingerprint()` uses this list
/// too). Each is at most 8 bytes: the machine compares a word's first 8
/// bytes.
pub const KEYWORDS: [&str; 26] = [
    "select", "where", "and", "or", "not", "set", "values", "by", "then", "else", "when", "in",
    "between", "like", "is", "limit", "offset", "return", "case", "on", "having", "as", "array",
    "distinct", "all", "any",
];

/// A word's first 8 bytes, little-endian.
const fn pack(w: &[u8]) -> u64 {
    let mut v = 0u64;
    let mut k = 0;
    while k < w.len() && k < 8 {
        v |= (w[k] as u64) << (8 * k);
        k += 1;
    }
    v
}

const fn packed() -> [u64; KEYWORDS.len()] {
    let mut out = [0u64; KEYWORDS.len()];
    let mut k = 0;
    while k < KEYWORDS.len() {
        assert!(KEYWORDS[k].len() <= 8);
        out[k] = pack(KEYWORDS[k].as_bytes());
        k += 1;
    }
    out
}
const PACKED: [u64; KEYWORDS.len()] = packed();

/// Whether `w` is one of [`KEYWORDS`].
pub fn is_keyword(w: &str) -> bool {
    KEYWORDS.contains(&w)
}

/// The FNV-1a hash of a fingerprint's bytes: what [`Fp`] computes from
/// the text it stands for.
pub fn string_hash(fingerprint: &str) -> u64 {
    let mut h = FNV_SEED;
    for b in fingerprint.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
    }
    h
}

#[inline(always)]
fn is_digit(c: u8) -> bool {
    c.is_ascii_digit()
}

/// A byte of an unquoted word after its first (and of a dollar tag, with
/// `$` left out: PostgreSQL's `ident_cont` and `dolq_cont`).
#[inline(always)]
fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// The machine and the text it reads: a per-CPU map value in the kernel.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Fp {
    /// The text, NUL-terminated or [`FP_LEN`] bytes.
    pub text: [u8; FP_LEN],
    /// Next byte to read.
    pub i: u32,
    /// See [`state`].
    pub state: u32,
    /// See [`flag`].
    pub flags: u32,
    /// Constants written so far (the `n` of `$n`).
    pub n: u32,
    /// A dollar quote's opening `$`.
    pub start: u32,
    pub tag_len: u32,
    /// Tag bytes matched of a closing delimiter.
    pub j: u32,
    /// Bytes of the open word.
    pub word_len: u32,
    /// The open word's first 8 bytes, lower-cased.
    pub word: u64,
    /// The hash of the fingerprint without its trailing `;` and spaces.
    pub h: u64,
    /// The hash of everything written.
    pub t: u64,
}

const _: () = assert!(core::mem::size_of::<Fp>() == FP_LEN + 8 * 4 + 8 * 3);

impl Fp {
    /// The machine at the start of the text (the text itself is not
    /// touched).
    #[inline(always)]
    pub fn reset(&mut self) {
        self.i = 0;
        self.state = state::NORMAL;
        self.flags = 0;
        self.n = 0;
        self.start = 0;
        self.tag_len = 0;
        self.j = 0;
        self.word_len = 0;
        self.word = 0;
        self.h = FNV_SEED;
        self.t = FNV_SEED;
    }

    /// The byte at `k`, 0 past the buffer. The index goes through a
    /// volatile read before it is masked: the compiler would otherwise
    /// fold the mask into what it knows of `k` (`(i + 1) & MASK` became
    /// `i + 1` under a test of `i` alone), a bound the verifier cannot
    /// follow.
    #[inline(always)]
    fn at(&self, k: u32) -> u8 {
        // SAFETY: a read of a local.
        let m = unsafe { core::ptr::read_volatile(&k) } as usize & MASK;
        let b = self.text[m];
        if (k as usize) < FP_LEN { b } else { 0 }
    }

    /// The byte before `k` (1 <= k <= FP_LEN: `i` never passes the
    /// buffer's end). Masked rather than compared: a compared `k - 1`
    /// lets the compiler address it as (buffer - 1) + k, a negative
    /// offset the verifier rejects.
    #[inline(always)]
    fn back(&self, k: u32) -> u8 {
        self.text[(k as usize + MASK) & MASK]
    }

    #[inline(always)]
    fn put(&mut self, b: u8) {
        self.t = (self.t ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        if b != b' ' && b != b';' {
            self.h = self.t;
        }
        self.flags |= flag::ANY;
    }

    /// A token begins: the space of the white space before it.
    #[inline(always)]
    fn begin(&mut self) {
        if self.flags & (flag::PENDING_SPACE | flag::ANY) == flag::PENDING_SPACE | flag::ANY {
            self.put(b' ');
        }
        self.flags &= !flag::PENDING_SPACE;
    }

    /// A constant: `$n`.
    #[inline(always)]
    fn constant(&mut self) {
        self.n += 1;
        self.begin();
        self.put(b'$');
        let n = self.n;
        let mut div = 1000u32;
        let mut started = false;
        // n <= FP_LEN < 10^4.
        for _ in 0..4 {
            let d = (n / div) % 10;
            if d != 0 || started || div == 1 {
                self.put(b'0' + d as u8);
                started = true;
            }
            div /= 10;
        }
        self.flags |= flag::AFTER_OPERAND;
    }

    #[inline(always)]
    fn operand(&mut self, yes: bool) {
        if yes {
            self.flags |= flag::AFTER_OPERAND;
        } else {
            self.flags &= !flag::AFTER_OPERAND;
        }
    }

    /// One step; whether the text is finished ([`Fp::h`] is then its
    /// hash).
    #[inline(always)]
    pub fn step(&mut self) -> bool {
        let i = self.i;
        let c = self.at(i);
        let s = self.state;
        if s == state::NORMAL {
            self.normal(i, c);
        } else if s == state::WORD {
            if c != 0 && (is_word(c) || c == b'$') {
                let lc = c.to_ascii_lowercase();
                self.put(lc);
                if self.word_len < 8 {
                    self.word |= u64::from(lc) << (8 * (self.word_len & 7));
                }
                self.word_len += 1;
                self.i = i + 1;
            } else {
                let kw = self.word_len <= 8 && {
                    let w = self.word;
                    let mut hit = false;
                    for p in PACKED {
                        hit |= w == p;
                    }
                    hit
                };
                self.operand(!kw);
                self.state = state::NORMAL;
            }
        } else if s == state::NUMBER {
            if is_digit(c) || c == b'.' {
                self.i = i + 1;
            } else if c == b'e' || c == b'E' {
                let mut j = i + 1;
                let sign = self.at(j);
                if sign == b'+' || sign == b'-' {
                    j += 1;
                }
                if is_digit(self.at(j)) {
                    self.i = j;
                    self.state = state::EXPONENT;
                } else {
                    self.state = state::NORMAL;
                }
            } else {
                self.state = state::NORMAL;
            }
        } else if s == state::EXPONENT || s == state::PARAM {
            if is_digit(c) {
                self.i = i + 1;
            } else {
                self.state = state::NORMAL;
            }
        } else if s == state::QUOTE {
            if c == 0 {
                self.state = state::DONE;
            } else if c == b'\'' {
                if self.at(i + 1) == b'\'' {
                    self.i = i + 2;
                } else {
                    self.i = i + 1;
                    self.state = state::NORMAL;
                }
            } else if c == b'\\' && self.flags & flag::ESCAPES != 0 {
                if self.at(i + 1) == 0 {
                    self.state = state::DONE;
                } else {
                    self.i = i + 2;
                }
            } else {
                self.i = i + 1;
            }
        } else if s == state::QIDENT {
            if c == 0 {
                self.state = state::DONE;
            } else if c == b'"' && self.at(i + 1) == b'"' {
                self.put(b'"');
                self.put(b'"');
                self.i = i + 2;
            } else {
                self.put(c);
                self.i = i + 1;
                if c == b'"' {
                    self.state = state::NORMAL;
                }
            }
        } else if s == state::LINE_COMMENT {
            if c == 0 {
                self.state = state::DONE;
            } else if c == b'\n' {
                self.state = state::NORMAL;
            } else {
                self.i = i + 1;
            }
        } else if s == state::BLOCK_COMMENT {
            if c == 0 {
                self.state = state::DONE;
            } else if c == b'*' && self.at(i + 1) == b'/' {
                self.i = i + 2;
                self.state = state::NORMAL;
            } else {
                self.i = i + 1;
            }
        } else if s == state::DOLLAR_TAG {
            if c != 0 && is_word(c) {
                self.i = i + 1;
            } else if c == b'$' {
                self.tag_len = i - self.start - 1;
                self.constant();
                self.i = i + 1;
                self.state = state::DOLLAR_BODY;
            } else {
                // Not a dollar quote: a `$` of its own, and the tag's
                // bytes read again as what they are.
                self.begin();
                self.put(b'$');
                self.operand(false);
                self.i = self.start + 1;
                self.state = state::NORMAL;
            }
        } else if s == state::DOLLAR_BODY {
            if c == 0 {
                self.state = state::DONE;
            } else {
                self.i = i + 1;
                if c == b'$' {
                    self.j = 0;
                    self.state = state::DOLLAR_CLOSE;
                }
            }
        } else if s == state::DOLLAR_CLOSE {
            // No tag byte is a `$`: a mismatch cannot hide the start of a
            // closing delimiter before the mismatched byte, which the body
            // reads again.
            if self.j < self.tag_len {
                if c != 0 && c == self.at(self.start + 1 + self.j) {
                    self.j += 1;
                    self.i = i + 1;
                } else {
                    self.state = state::DOLLAR_BODY;
                }
            } else if c == b'$' {
                self.i = i + 1;
                self.state = state::NORMAL;
            } else {
                self.state = state::DOLLAR_BODY;
            }
        } else {
            self.state = state::DONE;
        }
        self.state == state::DONE
    }

    /// A step outside any token: decides the token that starts at `i`.
    #[inline(always)]
    fn normal(&mut self, i: u32, c: u8) {
        let next = self.at(i + 1);
        if c == 0 {
            self.state = state::DONE;
        } else if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0c) {
            self.flags |= flag::PENDING_SPACE;
            self.i = i + 1;
        } else if c == b'-' && next == b'-' {
            self.flags |= flag::PENDING_SPACE;
            self.i = i + 2;
            self.state = state::LINE_COMMENT;
        } else if c == b'/' && next == b'*' {
            self.flags |= flag::PENDING_SPACE;
            self.i = i + 2;
            self.state = state::BLOCK_COMMENT;
        } else if c == b'\''
            || (matches!(c, b'E' | b'e' | b'B' | b'b' | b'X' | b'x' | b'N' | b'n')
                && next == b'\''
                && !(i > 0 && {
                    let p = self.back(i);
                    p.is_ascii_alphanumeric() || p == b'_'
                }))
        {
            let q = if c == b'\'' { i } else { i + 1 };
            let e = q > 0 && matches!(self.back(q), b'e' | b'E');
            if e {
                self.flags |= flag::ESCAPES;
            } else {
                self.flags &= !flag::ESCAPES;
            }
            self.constant();
            self.i = q + 1;
            self.state = state::QUOTE;
        } else if c == b'"' {
            self.begin();
            self.put(b'"');
            self.operand(true);
            self.i = i + 1;
            self.state = state::QIDENT;
        } else if c == b'$' && is_digit(next) {
            self.constant();
            self.i = i + 2;
            self.state = state::PARAM;
        } else if c == b'$' {
            self.start = i;
            self.i = i + 1;
            self.state = state::DOLLAR_TAG;
        } else if is_digit(c)
            || (c == b'.' && is_digit(next))
            || (c == b'-'
                && self.flags & flag::AFTER_OPERAND == 0
                && (is_digit(next) || next == b'.'))
        {
            self.constant();
            self.i = if c == b'-' { i + 1 } else { i };
            self.state = state::NUMBER;
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            self.begin();
            self.word = 0;
            self.word_len = 0;
            self.state = state::WORD;
        } else {
            self.begin();
            self.put(c);
            self.operand(c == b')' || c == b']');
            self.i = i + 1;
        }
    }

    /// Runs the machine over `text` (up to its first NUL, at most
    /// [`FP_LEN`] bytes) as the kernel does: the hash and the steps taken.
    pub fn run(&mut self, text: &[u8]) -> (u64, u32) {
        let n = text.len().min(FP_LEN);
        self.text[..n].copy_from_slice(&text[..n]);
        if n < FP_LEN {
            self.text[n] = 0;
        }
        self.reset();
        let mut steps = 0;
        while steps < FP_STEPS {
            steps += 1;
            if self.step() {
                break;
            }
        }
        (self.h, steps)
    }

    /// A machine with an empty text.
    pub const fn new() -> Self {
        Fp {
            text: [0; FP_LEN],
            i: 0,
            state: state::NORMAL,
            flags: 0,
            n: 0,
            start: 0,
            tag_len: 0,
            j: 0,
            word_len: 0,
            word: 0,
            h: FNV_SEED,
            t: FNV_SEED,
        }
    }
}

impl Default for Fp {
    fn default() -> Self {
        Self::new()
    }
}

/// The fingerprint hash of `text` as the kernel computes it.
pub fn hash(text: &[u8]) -> u64 {
    Fp::new().run(text).0
}

#[cfg(feature = "user")]
unsafe impl aya::Pod for Fp {}
