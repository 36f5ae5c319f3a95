//! Statement fingerprints: the query text with its constants replaced, so
//! that `SELECT abalance FROM pgbench_accounts WHERE aid = 17` and `… = 42`
//! are one statement.
//!
//! The rule, applied to the tokens of the text:
//! - numeric literals (`42`, `3.5`, `1e-3`, `.5`), string literals (`'x'`,
//!   `E'x'`, `B'01'`, `X'ff'`, `$$x$$`, `$tag$x$tag$`) and parameters (`$1`)
//!   become `$1`, `$2`, … in order of appearance;
//! - a minus sign directly before a number is part of the constant when it
//!   cannot be a binary minus (after an operator, `(`, `,`, a keyword or at
//!   the start), as PostgreSQL's grammar folds it (`doNegate`);
//! - comments go; runs of white space become one space; unquoted words are
//!   lower-cased in ASCII (PostgreSQL folds unquoted identifiers and
//!   keywords so in a multibyte encoding: `downcase_identifier`);
//! - a string left open (`'…`, `$$…`, a quoted identifier) runs to the
//!   end of the text, as in a text cut at its buffer's end;
//!   quoted identifiers keep their case; a trailing `;` goes.
//!
//! Relation to pg_stat_statements: its `queryid` hashes the parse tree after
//! parse analysis, and its `query` column shows the first text seen with the
//! constants that the jumble recorded replaced by `$n`. Two texts with the
//! same fingerprint here have the same `queryid` when they name the same
//! objects (same `search_path` resolution, same user and database, which
//! the queryid's key also holds); texts that differ only in ways the parser
//! ignores beyond the above (`a=1` vs `(a = 1)`, `IN (1, 2)` vs
//! `IN (1, 2, 3)`) share a `queryid` in PostgreSQL 15 only in the first
//! case, and are two fingerprints here. A text holding several statements
//! (`BEGIN; UPDATE …; END`) is one fingerprint here and several entries
//! there. pg_stat_statements' own normalised texts fingerprint to the same
//! value as the texts they stand for (its `$n` are parameters here), which
//! is how the cross-check matches the two.

/// The fingerprint of a query text.
pub fn fingerprint(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut n = 0u32;
    let mut i = 0;
    // Whether a '-' here would be unary (the previous token is not an
    // operand).
    let mut after_operand = false;
    let mut pending_space = false;
    let push = |out: &mut String, s: &str, pending: &mut bool| {
        if *pending && !out.is_empty() {
            out.push(' ');
        }
        *pending = false;
        out.push_str(s);
    };
    let mut constant = |out: &mut String, pending: &mut bool| {
        n += 1;
        push(out, &format!("${n}"), pending);
    };
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            pending_space = true;
            i += 1;
        } else if c == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            pending_space = true;
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            pending_space = true;
        } else if c == b'\''
            || (matches!(c.to_ascii_uppercase(), b'E' | b'B' | b'X' | b'N')
                && b.get(i + 1) == Some(&b'\'')
                && !prev_is_word(b, i))
        {
            let q = if c == b'\'' { i } else { i + 1 };
            i = skip_quoted(b, q, b'\'');
            constant(&mut out, &mut pending_space);
            after_operand = true;
        } else if c == b'"' {
            let end = skip_quoted(b, i, b'"');
            push(&mut out, &text[i..end], &mut pending_space);
            i = end;
            after_operand = true;
        } else if c == b'$' && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            constant(&mut out, &mut pending_space);
            after_operand = true;
        } else if c == b'$'
            && let Some(end) = dollar_quote_end(b, i)
        {
            i = end;
            constant(&mut out, &mut pending_space);
            after_operand = true;
        } else if c.is_ascii_digit()
            || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
            || (c == b'-'
                && !after_operand
                && b.get(i + 1)
                    .is_some_and(|d| d.is_ascii_digit() || *d == b'.'))
        {
            i = skip_number(b, if c == b'-' { i + 1 } else { i });
            constant(&mut out, &mut pending_space);
            after_operand = true;
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80 || b[i] == b'$')
            {
                i += 1;
            }
            let word = text[start..i].to_ascii_lowercase();
            after_operand = !is_keyword(&word);
            push(&mut out, &word, &mut pending_space);
        } else {
            let s = &text[i..i + 1];
            push(&mut out, s, &mut pending_space);
            after_operand = c == b')' || c == b']';
            i += 1;
        }
    }
    while out.ends_with(';') || out.ends_with(' ') {
        out.pop();
    }
    out
}

fn prev_is_word(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// End (exclusive) of a quoted run starting at `q`; a doubled quote is an
/// escaped one.
fn skip_quoted(b: &[u8], q: usize, quote: u8) -> usize {
    let mut i = q + 1;
    while i < b.len() {
        if b[i] == quote {
            if b.get(i + 1) == Some(&quote) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        if b[i] == b'\\' && quote == b'\'' && q > 0 && b[q - 1].eq_ignore_ascii_case(&b'e') {
            i += 2;
            continue;
        }
        i += 1;
    }
    b.len()
}

/// End of a `$tag$…$tag$` string starting at `i`, if one starts there
/// (a tag's bytes are PostgreSQL's `dolq_cont`: letters, digits, `_` and
/// every byte from 0x80); one left open runs to the end of the text, as
/// PostgreSQL's lexer reads it (a text cut short is where one is met).
fn dollar_quote_end(b: &[u8], i: usize) -> Option<usize> {
    let mut e = i + 1;
    while e < b.len() && (b[e].is_ascii_alphanumeric() || b[e] == b'_' || b[e] >= 0x80) {
        e += 1;
    }
    if b.get(e) != Some(&b'$') {
        return None;
    }
    let delim = &b[i..=e];
    let body = e + 1;
    Some(
        b[body..]
            .windows(delim.len())
            .position(|w| w == delim)
            .map_or(b.len(), |p| body + p + delim.len()),
    )
}

fn skip_number(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
        i += 1;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            i = j;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
        }
    }
    i
}

/// Words after which a '-' is unary (shared with the kernel's machine).
fn is_keyword(w: &str) -> bool {
    ttp_common::fingerprint::is_keyword(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pgbench's TPC-B-like script, fingerprinted as pg_stat_statements shows
    /// it (the `+ -1234` is one constant: `abalance + $1`).
    #[test]
    fn pgbench_statements() {
        assert_eq!(
            fingerprint(
                "UPDATE pgbench_accounts SET abalance = abalance + -1234 WHERE aid = 5678;"
            ),
            "update pgbench_accounts set abalance = abalance + $1 where aid = $2"
        );
        assert_eq!(
            fingerprint(
                "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (3, 1, 77, -12, CURRENT_TIMESTAMP);"
            ),
            "insert into pgbench_history (tid, bid, aid, delta, mtime) values ($1, $2, $3, $4, current_timestamp)"
        );
        assert_eq!(fingerprint("BEGIN;"), "begin");
        assert_eq!(fingerprint("END;"), "end");
    }

    /// Catches pg_stat_statements' normalised text fingerprinting to
    /// something else than the texts it stands for.
    #[test]
    fn pg_stat_statements_text_is_a_fixed_point() {
        let raw = "SELECT abalance FROM pgbench_accounts WHERE aid = 42";
        let pgss = "SELECT abalance FROM pgbench_accounts WHERE aid = $1";
        assert_eq!(fingerprint(raw), fingerprint(pgss));
        assert_eq!(fingerprint(&fingerprint(raw)), fingerprint(raw));
    }

    /// Binary minus stays an operator; strings, comments, case, spaces.
    #[test]
    fn constants_comments_case() {
        assert_eq!(
            fingerprint("select a-1, a - 2 from t"),
            "select a-$1, a - $2 from t"
        );
        assert_eq!(
            fingerprint(
                "SELECT  'it''s', E'a\\'b', x'ff' /* c */ FROM \"T\" -- end\n WHERE b = -.5e3"
            ),
            "select $1, $2, $3 from \"T\" where b = $4"
        );
        assert_eq!(fingerprint("select $$a'b$$, $q$x$q$"), "select $1, $2");
        assert_eq!(fingerprint("select f(-3)"), "select f($1)");
        assert_eq!(fingerprint("select t1.c2 from t1"), "select t1.c2 from t1");
    }
}

#[cfg(test)]
mod corpus;
