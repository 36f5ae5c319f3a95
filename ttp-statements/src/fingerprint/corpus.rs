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

/// The statements of a file made by `tests/data/sql/make_corpus.py`, with
/// their labels.
fn labelled(file: &str) -> Vec<(&str, &str)> {
    file.split("-- @ ")
        .skip(1)
        .map(|s| s.split_once('\n').expect("a label line"))
        .map(|(label, text)| (label, text.trim_end_matches('\n')))
        .collect()
}

const PGBENCH: &str = include_str!("../../tests/data/sql/pgbench.sql");
const TPCH: &str = include_str!("../../tests/data/sql/tpch.sql");

/// Each statement with its digits changed (`c1` becomes `c4` as `1`
/// becomes `4`: some variants group with their original, some do not,
/// and both machines must agree which), and cut short every 23 bytes (a
/// text cut inside a string, a comment or a dollar quote, as the server's
/// buffer cuts a long one).
fn variants(text: &str) -> Vec<String> {
    let rotated: String = text
        .chars()
        .map(|c| match c.to_digit(10) {
            Some(d) => char::from_digit((d + 3) % 10, 10).unwrap(),
            None => c,
        })
        .collect();
    let mut out = vec![text.to_string(), rotated];
    let mut n = 23;
    while n < text.len() {
        if text.is_char_boundary(n) {
            out.push(text[..n].to_string());
        }
        n += 23;
    }
    out
}

/// Texts that make the machine read bytes again (dollar tags that open
/// nothing, dollar quotes that open and close, numbers cut at an `e`)
/// over the whole buffer: within the steps the kernel allows, and still
/// equal. Catches a bound on the steps too low for some text.
#[test]
fn the_worst_texts_finish_within_the_steps() {
    let mut worst = 0;
    for unit in [
        "$a", "$a ", "$", "$$", "$ab$x", "a$", "'", "''", "E'\\", "1e", "1e+", "-1", "- ", "/*",
        "--", "\"", ".", "x", " ",
    ] {
        let text = unit.repeat(FP_LEN / unit.len() + 2);
        let (h, steps) = Fp::new().run(text.as_bytes());
        assert_eq!(h, string_hash(&fingerprint(cut(&text))), "{unit:?}");
        worst = worst.max(steps);
    }
    assert!(worst < FP_STEPS, "{worst}");
    eprintln!("worst: {worst} steps of {FP_STEPS}");
}

/// pgbench's scripts as each query mode sends them and the 22 TPC-H
/// queries: the statements of one label (other constants) share one
/// kernel hash, those of two labels do not, and with their variants the
/// kernel's groups are userspace's. Catches a constant the machine does
/// not fold as `fingerprint()` does, and a text it splits or merges.
#[test]
fn pgbench_and_tpch_group_alike() {
    for (name, file, labels) in [("pgbench", PGBENCH, 7), ("tpch", TPCH, 24)] {
        let stmts = labelled(file);
        let mut by_label: HashMap<&str, u64> = HashMap::new();
        for (label, text) in &stmts {
            let h = kernel(text);
            assert_eq!(
                *by_label.entry(label).or_insert(h),
                h,
                "{name} {label}: {text}"
            );
        }
        assert_eq!(by_label.len(), labels, "{name}");
        let distinct: std::collections::HashSet<u64> = by_label.values().copied().collect();
        assert_eq!(distinct.len(), labels, "{name}: two labels share a hash");
        let texts: Vec<String> = stmts.iter().flat_map(|(_, t)| variants(t)).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let groups = same_partition(&refs);
        eprintln!(
            "{name}: {} statements, {} with variants, {groups} groups",
            stmts.len(),
            refs.len()
        );
    }
}

/// The statements of a SQL script, split at `;` outside strings, quoted
/// identifiers, comments and dollar quotes; psql's backslash commands
/// left out.
fn split(script: &str) -> Vec<String> {
    let b = script.as_bytes();
    let (mut out, mut start, mut i) = (Vec::new(), 0, 0);
    while i < b.len() {
        let c = b[i];
        let rest = &script[i..];
        if (c == b'\'' || c == b'"') && i + 1 < b.len() {
            // Past the closing quote (a doubled one closes and reopens).
            i += 2 + b[i + 1..].iter().position(|x| *x == c).unwrap_or(b.len());
        } else if rest.starts_with("--") || (c == b'\\' && (i == 0 || b[i - 1] == b'\n')) {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if c == b'$'
            && let Some(t) = rest[1..].find('$')
            && rest[1..1 + t]
                .bytes()
                .all(|x| x.is_ascii_alphanumeric() || x == b'_')
            && !rest[1..].starts_with(|x: char| x.is_ascii_digit())
        {
            let tag = &rest[..t + 2];
            i += tag.len();
            i += script[i..]
                .find(tag)
                .map_or(script.len() - i, |e| e + tag.len());
        } else if c == b';' {
            out.push(script[start..=i].trim().to_string());
            start = i + 1;
            i += 1;
        } else {
            i += 1;
        }
        i = i.min(b.len());
    }
    out.retain(|s| s.len() > 1 && !s.starts_with('\\'));
    out
}

/// Directories of real SQL: PostgreSQL's extension scripts where a server
/// is installed (they ship with it), and those named in `TTP_SQL_CORPUS`
/// (colon-separated; e.g. a checkout's src/test/regress/sql).
fn real_sql_dirs() -> Vec<std::path::PathBuf> {
    let mut dirs = Vec::new();
    for pattern in [
        "/usr/share/postgresql",
        "/var/cache/ttp/postgresql",
        "/usr/pgsql",
    ] {
        let Ok(rd) = std::fs::read_dir(pattern) else {
            continue;
        };
        for e in rd.flatten() {
            for sub in ["extension", "share/postgresql/extension"] {
                let d = e.path().join(sub);
                if d.is_dir() {
                    dirs.push(d);
                }
            }
        }
    }
    if let Ok(v) = std::env::var("TTP_SQL_CORPUS") {
        dirs.extend(v.split(':').filter(|s| !s.is_empty()).map(Into::into));
    }
    dirs
}

/// Real SQL (functions with `$$` bodies, `E''` strings, comments, casts,
/// quoted names): the kernel's groups are userspace's, on every statement
/// and its variants. Skipped, and said so, where no PostgreSQL is
/// installed and `TTP_SQL_CORPUS` is not set.
#[test]
fn real_sql_groups_alike() {
    let dirs = real_sql_dirs();
    if dirs.is_empty() {
        eprintln!("real_sql_groups_alike: no PostgreSQL scripts found; skipped");
        return;
    }
    let mut texts = Vec::new();
    let mut statements = 0;
    for d in &dirs {
        let mut files: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "sql"))
            .collect();
        files.sort();
        for f in files {
            let Ok(script) = std::fs::read_to_string(&f) else {
                continue;
            };
            for s in split(&script) {
                statements += 1;
                texts.extend(variants(&s));
            }
        }
    }
    texts.sort();
    texts.dedup();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let groups = same_partition(&refs);
    eprintln!(
        "real SQL: {} directories, {statements} statements, {} distinct texts with variants, {groups} groups",
        dirs.len(),
        refs.len()
    );
    assert!(statements > 0, "{dirs:?}");
}

/// Catches a splitter that cuts inside a string, a dollar quote or a
/// comment, or keeps psql's backslash commands.
#[test]
fn split_at_statement_ends() {
    assert_eq!(
        split("select 'a;''b'; select $f$x;y$f$, \"c;d\";\n-- e;\n\\echo f;\nselect /* g; */ 1;"),
        [
            "select 'a;''b';",
            "select $f$x;y$f$, \"c;d\";",
            "-- e;\n\\echo f;\nselect /* g; */ 1;"
        ]
    );
}
