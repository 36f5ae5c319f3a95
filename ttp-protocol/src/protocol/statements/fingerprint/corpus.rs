//! The kernel's fingerprint hash (`ttp_common::fingerprint`) against
//! [`fingerprint`] on a corpus of real SQL: the hash of every text equals
//! the hash of its fingerprint's bytes, so the two group texts alike.
use std::collections::HashMap;

use ttp_common::fingerprint::{FP_LEN, FP_STEPS, Fp, string_hash};

use super::fingerprint;

/// The kernel's hash of `text`, and the steps it took (checked against
/// the bound the kernel's loop runs).
fn kernel(text: &str) -> u64 {
    let (h, steps) = Fp::new().run(text.as_bytes());
    assert!(steps < FP_STEPS, "{steps} steps for {text:?}");
    h
}

/// The text the kernel reads: at most `FP_LEN` bytes.
fn cut(text: &str) -> &str {
    let mut n = text.len().min(FP_LEN);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    &text[..n]
}

/// Catches a text whose kernel hash is not the hash of its fingerprint.
fn check(text: &str) {
    let t = cut(text);
    assert_eq!(
        kernel(t),
        string_hash(&fingerprint(t)),
        "text {t:?}\nfingerprint {:?}",
        fingerprint(t)
    );
}

#[test]
fn tokens_one_by_one() {
    for t in [
        "",
        ";",
        " ; ; ",
        "select 1",
        "SELECT  1 ;",
        "select a-1, a - 2 from t",
        "select -1, (-2), f(-.5e3), x- -3",
        "SELECT  'it''s', E'a\\'b', x'ff' /* c */ FROM \"T\" -- end\n WHERE b = -.5e3",
        "select $$a'b$$, $q$x$q$, $1, $23",
        "select $a b$, $ $, $$ open",
        "select $q$ a $q b $qq$ c $q$ d",
        "select $x$$x$, $x$ $x x$ $x$",
        "select 1e5, 1e+5, 1e-, 1ea, 1.2.3, .x, -.x",
        "select \"A \"\"b\"\" ;\" ;",
        "select \"open ;",
        "select 'open \\",
        "select e'\\",
        "select thee'x\\'y'",
        "select 1e'x', b'01', n'x', _e'x'",
        "Select ÉTÉ, été, Ünïcödé$1 from tàble",
        "select a$b, a$1 from t",
        "select 1 -- c",
        "select 1 /* open",
        "select/**/1/**/;/**/",
        "SELECT\t1\r\n\x0c;\n",
        "begin; select 1; end;",
        "select x from t where y = any (array[-1, -2]) and z between -3 and -4",
        "select case when a then -1 else -2 end, distinct - 1, all -1",
        "select tHeN-1, SELECTX-1, selec-1, distincts-1",
    ] {
        check(t);
    }
}

/// The texts of a corpus file: statements separated by lines holding only
/// `--` and a name (`-- @`).
fn statements(corpus: &str) -> Vec<&str> {
    corpus
        .split("\n-- @\n")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// Catches two texts grouped together by one and apart by the other.
fn same_partition(texts: &[&str]) -> usize {
    let mut by_kernel: HashMap<u64, String> = HashMap::new();
    let mut by_user: HashMap<String, u64> = HashMap::new();
    for t in texts {
        let t = cut(t);
        check(t);
        let (k, f) = (kernel(t), fingerprint(t));
        assert_eq!(by_kernel.entry(k).or_insert_with(|| f.clone()), &f, "{t:?}");
        assert_eq!(*by_user.entry(f).or_insert(k), k, "{t:?}");
    }
    assert_eq!(by_kernel.len(), by_user.len());
    by_user.len()
}
