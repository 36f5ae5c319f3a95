//! `load --postgres … -f SCRIPT`: a transaction script in the subset of
//! pgbench's custom-script format (pgbench(1), "Custom Scripts") that a
//! fixed-rate driver needs. One request runs the whole script on one
//! connection, so its latency is the transaction's.
//!
//! - one SQL statement per line (a trailing `;` is dropped); blank lines and
//!   `--` comment lines are skipped;
//! - `\set NAME random(LO, HI)` draws an integer uniformly on [LO, HI] per
//!   transaction (pgbench's `random`);
//! - `:NAME` in a statement is that variable, sent as a parameter (`$n`),
//!   as pgbench does with `-M prepared`; `::` (a cast) and text in single
//!   quotes are left alone;
//! - `BEGIN;` and `END;` (or `COMMIT;`) are statements like the others.
//!
//! Anything else pgbench accepts (other meta-commands, expressions,
//! multi-line statements) is refused with the line and what to write
//! instead, before anything is sent.
use ttp_load::schedule::SplitMix64;

/// One statement of the script, with its variables replaced by `$1…`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct ScriptStatement {
    /// The SQL sent to the server (`:aid` → `$1`).
    pub sql: String,
    /// Per `$n` of `sql`, in order, the index of its variable in
    /// [`Script::vars`].
    pub vars: Vec<usize>,
}

/// A parsed transaction script.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Script {
    /// The `\set` variables, in the order they are drawn.
    pub vars: Vec<ParamSpec>,
    pub statements: Vec<ScriptStatement>,
    /// Parsed from a file (`-f`), not `--sql`: errors name `:NAME`.
    #[serde(skip)]
    pub from_file: bool,
}

impl Script {
    /// `--sql SQL --param …`: one statement whose `$1`, `$2`, … are the
    /// params in order.
    pub(crate) fn single(sql: &str, params: Vec<ParamSpec>) -> Self {
        Self {
            statements: vec![ScriptStatement {
                sql: sql.to_string(),
                vars: (0..params.len()).collect(),
            }],
            vars: params,
            from_file: false,
        }
    }

    /// Parses a script's text; `name` (the file) prefixes every error.
    pub(crate) fn parse(name: &str, text: &str) -> Result<Self, String> {
        let mut vars: Vec<ParamSpec> = Vec::new();
        let mut statements = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let at = |msg: String| format!("{name}:{}: {msg}", i + 1);
            let line = raw.trim();
            if line.is_empty() || line.starts_with("--") {
                continue;
            }
            if let Some(meta) = line.strip_prefix('\\') {
                let spec = parse_set(meta).map_err(at)?;
                if vars.iter().any(|v| v.name == spec.name) {
                    return Err(at(format!(
                        "variable {} is set twice; give each \\set its own name",
                        spec.name
                    )));
                }
                vars.push(spec);
                continue;
            }
            let sql = line.strip_suffix(';').unwrap_or(line).trim_end();
            if sql.contains(';') {
                return Err(at(
                    "one statement per line: put each statement on its own line".into(),
                ));
            }
            statements.push(substitute(sql, &vars).map_err(at)?);
        }
        if statements.is_empty() {
            return Err(format!(
                "{name}: no SQL statement (one per line, e.g. SELECT abalance FROM pgbench_accounts WHERE aid = :aid;)"
            ));
        }
        Ok(Self {
            vars,
            statements,
            from_file: true,
        })
    }

    /// The statements' SQL, one per line, for reports.
    pub fn text(&self) -> String {
        self.statements
            .iter()
            .map(|s| s.sql.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// `set NAME random(LO, HI)` (the backslash already removed).
fn parse_set(meta: &str) -> Result<ParamSpec, String> {
    let bad = || {
        format!(
            "\\{meta}: only `\\set NAME random(LO, HI)` with integer LO <= HI is supported, e.g. \\set aid random(1, 100000)"
        )
    };
    let rest = meta.strip_prefix("set").ok_or_else(bad)?;
    if !rest.starts_with(char::is_whitespace) {
        return Err(bad());
    }
    let mut words = rest.trim().splitn(2, char::is_whitespace);
    let name = words.next().ok_or_else(bad)?;
    let expr = words
        .next()
        .ok_or_else(bad)?
        .replace(char::is_whitespace, "");
    if !is_name(name) {
        return Err(bad());
    }
    let args = expr
        .strip_prefix("random(")
        .and_then(|e| e.strip_suffix(')'))
        .ok_or_else(bad)?;
    let (lo, hi) = args.split_once(',').ok_or_else(bad)?;
    ParamSpec::parse(&format!("{name}=uniform:{lo}:{hi}")).map_err(|_| bad())
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Replaces each `:NAME` outside quotes (and not a `::` cast) by `$n`, the
/// same variable by the same `$n`.
fn substitute(sql: &str, vars: &[ParamSpec]) -> Result<ScriptStatement, String> {
    if sql
        .as_bytes()
        .windows(2)
        .any(|w| w[0] == b'$' && w[1].is_ascii_digit())
    {
        return Err("a script's statement takes its values from :NAME variables, not $n".into());
    }
    let chars: Vec<char> = sql.chars().collect();
    let mut out = String::with_capacity(sql.len());
    let mut used: Vec<usize> = Vec::new();
    let mut in_quote = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            in_quote = !in_quote;
        }
        if in_quote || c != ':' {
            out.push(c);
            i += 1;
            continue;
        }
        if chars.get(i + 1) == Some(&':') {
            out.push_str("::");
            i += 2;
            continue;
        }
        let start = i + 1;
        let mut end = start;
        while end < chars.len() && (chars[end].is_ascii_alphanumeric() || chars[end] == '_') {
            end += 1;
        }
        if end == start {
            out.push(c);
            i += 1;
            continue;
        }
        let name: String = chars[start..end].iter().collect();
        let Some(v) = vars.iter().position(|p| p.name == name) else {
            return Err(format!(
                ":{name} is not set; add `\\set {name} random(LO, HI)` on a line before it"
            ));
        };
        let n = match used.iter().position(|&u| u == v) {
            Some(k) => k + 1,
            None => {
                used.push(v);
                used.len()
            }
        };
        out.push_str(&format!("${n}"));
        i = end;
    }
    Ok(ScriptStatement {
        sql: out,
        vars: used,
    })
}

/// `--param NAME=uniform:LO:HI`: the value of one `$n` of the statement,
/// drawn per request (pgbench's `\set NAME random(LO, HI)`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct ParamSpec {
    pub name: String,
    pub distribution: &'static str,
    pub lo: i64,
    pub hi: i64,
}

impl ParamSpec {
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "--param {text}: expected NAME=uniform:LO:HI with integers LO <= HI, e.g. aid=uniform:1:100000"
            )
        };
        let (name, dist) = text.split_once('=').ok_or_else(bad)?;
        let mut parts = dist.split(':');
        let (Some("uniform"), Some(lo), Some(hi), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let (lo, hi): (i64, i64) = (
            lo.trim().parse().map_err(|_| bad())?,
            hi.trim().parse().map_err(|_| bad())?,
        );
        if name.trim().is_empty() || lo > hi {
            return Err(bad());
        }
        Ok(Self {
            name: name.trim().to_string(),
            distribution: "uniform",
            lo,
            hi,
        })
    }

    /// A value uniform on [lo, hi] (Lemire's multiply-shift: the bias is
    /// below range/2^64).
    pub(crate) fn draw(&self, rng: &mut SplitMix64) -> i64 {
        let range = (self.hi as i128 - self.lo as i128 + 1) as u128;
        let off = (u128::from(rng.next_u64()) * range) >> 64;
        (self.lo as i128 + off as i128) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pgbench's own select-and-update transaction, reduced to the subset:
    /// variables become `$n` in first-use order (the same variable twice is
    /// one `$n`), casts and quoted colons stay, BEGIN/END are statements.
    /// Catches a `::int` cast read as a variable, a quoted ':x' replaced,
    /// and a variable used twice sent twice.
    #[test]
    fn a_pgbench_script_becomes_prepared_statements() {
        let text = "-- tpcb-like, reduced\n\\set aid random(1, 100000)\n\\set delta random(-5000, 5000)\n\nBEGIN;\nUPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;\nSELECT abalance::bigint, ':aid' FROM pgbench_accounts WHERE aid = :aid AND :aid > 0;\nEND;\n";
        let s = Script::parse("t.sql", text).unwrap();
        assert_eq!(s.vars.len(), 2);
        assert_eq!(
            (s.vars[1].name.as_str(), s.vars[1].lo, s.vars[1].hi),
            ("delta", -5000, 5000)
        );
        let sql: Vec<&str> = s.statements.iter().map(|x| x.sql.as_str()).collect();
        assert_eq!(
            sql,
            [
                "BEGIN",
                "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
                "SELECT abalance::bigint, ':aid' FROM pgbench_accounts WHERE aid = $1 AND $1 > 0",
                "END"
            ]
        );
        assert_eq!(s.statements[1].vars, [1, 0]);
        assert_eq!(s.statements[2].vars, [0]);
        assert!(s.statements[0].vars.is_empty());
    }

    /// Each refusal names the file and line and says what to write.
    /// Catches a script pgbench would run differently accepted silently.
    #[test]
    fn unsupported_lines_are_refused_with_their_line() {
        for (text, line, what) in [
            ("SELECT :x;", 1, "\\set x random"),
            (
                "\\set a random(1, 10)\n\\sleep 1 ms",
                2,
                "only `\\set NAME random",
            ),
            ("\\set a 5 * 2", 1, "only `\\set NAME random"),
            ("\\set a random(10, 1)", 1, "LO <= HI"),
            (
                "\\set a random(1,2)\n\\set a random(1,2)\nSELECT 1",
                2,
                "set twice",
            ),
            ("SELECT 1; SELECT 2;", 1, "one statement per line"),
            ("SELECT $1", 1, ":NAME variables"),
        ] {
            let e = Script::parse("s.sql", text).unwrap_err();
            assert!(e.starts_with(&format!("s.sql:{line}: ")), "{text:?}: {e}");
            assert!(e.contains(what), "{text:?}: {e}");
        }
        let e = Script::parse("s.sql", "-- nothing\n\n").unwrap_err();
        assert!(e.contains("no SQL statement"), "{e}");
    }
}
