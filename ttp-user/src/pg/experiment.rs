//! An experiment on PostgreSQL (TTPv2 Fig. 2): a set of queries over a
//! variable table whose cardinality the experiment varies, each query run
//! as one Q@C of N QEs at each cardinality.
//!
//! Data repeatability (Sec. 3.2.1): a maximal table is generated once from a
//! recorded random seed; at each cardinality the variable table is created
//! anew with `SELECT … INTO` from it, so that "the cardinality of the table
//! is coupled with the number of pages the table occupies".
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{error::PgError, session::Session};

/// The specification file (TOML), as written by the user.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// A name for reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Connection string (key=value pairs or a postgresql:// URL).
    pub connection: String,
    /// QEs per Q@C (the paper's 10, Sec. 3).
    #[serde(default = "ten")]
    pub n: u32,
    #[serde(default)]
    pub cold_cache: bool,
    /// Shell command restarting the server for a cold cache (default:
    /// pg_ctl restart of the running server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_cmd: Option<String>,
    /// First back-off after a transient error, e.g. "100ms".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
    /// Per-QE statement timeout (QE13), e.g. "20m".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Cardinalities of the variable table, in the order they are run.
    pub cardinalities: Vec<u64>,
    pub data: DataSpec,
    #[serde(rename = "query")]
    pub queries: Vec<QuerySpec>,
}

fn ten() -> u32 {
    10
}

/// How the tables are made (Sec. 3.2.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSpec {
    /// Random seed (0 ≤ seed < 2³¹) given to `setseed` before the maximal
    /// table is generated; taken from the clock when left out, and always
    /// recorded in the study.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The maximal table, built once.
    #[serde(default = "max_table")]
    pub max_table: String,
    /// The variable table, built at each cardinality; the queries use it.
    #[serde(default = "var_table")]
    pub table: String,
    /// Rows of the maximal table (default: the largest cardinality).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cardinality: Option<u64>,
    /// The SELECT generating the maximal table's rows; `{max_cardinality}`
    /// is replaced. Its random() calls follow the seed.
    pub generate: String,
    /// The statement populating the variable table; `{table}`,
    /// `{max_table}` and `{cardinality}` are replaced.
    #[serde(default = "populate")]
    pub populate: String,
}

fn max_table() -> String {
    "ttp_max".into()
}
fn var_table() -> String {
    "ttp_var".into()
}
fn populate() -> String {
    "SELECT * INTO {table} FROM {max_table} LIMIT {cardinality}".into()
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuerySpec {
    pub name: String,
    pub sql: String,
}

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("the specification is not valid TOML for an experiment: {0}")]
    Toml(String),
    #[error("{0}")]
    Invalid(String),
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_lowercase() || f == '_')
        && c.all(|x| x.is_ascii_lowercase() || x.is_ascii_digit() || x == '_')
        && s.len() <= 63
}

impl Spec {
    /// Parses and checks a specification.
    pub fn parse(text: &str) -> Result<Spec, SpecError> {
        let spec: Spec = toml::from_str(text).map_err(|e| SpecError::Toml(e.to_string()))?;
        spec.validate()?;
        Ok(spec)
    }

    /// Reads and checks a specification already parsed as TOML (`lab
    /// submit` takes the lab's own keys out first).
    pub(crate) fn from_table(table: toml::Table) -> Result<Spec, SpecError> {
        let spec: Spec = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| SpecError::Toml(e.to_string()))?;
        spec.validate()?;
        Ok(spec)
    }

    fn validate(&self) -> Result<(), SpecError> {
        let bad = |m: String| Err(SpecError::Invalid(m));
        if self.n == 0 {
            return bad("n must be at least 1 (the paper uses 10 QEs per Q@C)".into());
        }
        if self.cardinalities.is_empty() || self.cardinalities.contains(&0) {
            return bad("cardinalities must list at least one positive number of rows".into());
        }
        let distinct: BTreeSet<u64> = self.cardinalities.iter().copied().collect();
        if distinct.len() != self.cardinalities.len() {
            return bad("cardinalities must not repeat".into());
        }
        let largest = self.cardinalities.iter().copied().max().unwrap_or(0);
        if let Some(m) = self.data.max_cardinality
            && m < largest
        {
            return bad(format!(
                "data.max_cardinality {m} is below the largest cardinality {largest}"
            ));
        }
        for t in [&self.data.max_table, &self.data.table] {
            if !is_ident(t) {
                return bad(format!(
                    "table name {t:?} must be a lower-case SQL identifier (letters, digits, _)"
                ));
            }
        }
        if self.data.max_table == self.data.table {
            return bad("data.max_table and data.table must differ".into());
        }
        if self.data.seed.is_some_and(|s| s >= 1 << 31) {
            return bad("data.seed must be below 2^31".into());
        }
        if self.queries.is_empty() {
            return bad("give at least one [[query]] with a name and sql".into());
        }
        let mut names = BTreeSet::new();
        for q in &self.queries {
            if q.name.trim().is_empty() || q.sql.trim().is_empty() {
                return bad("every [[query]] needs a name and sql".into());
            }
            if !names.insert(q.name.as_str()) {
                return bad(format!("query name {:?} is used twice", q.name));
            }
        }
        for (what, v) in [("backoff", &self.backoff), ("timeout", &self.timeout)] {
            if let Some(v) = v
                && humantime::parse_duration(v).is_err()
            {
                return bad(format!(
                    "{what} = {v:?} is not a duration like \"100ms\" or \"20m\""
                ));
            }
        }
        Ok(())
    }

    /// Rows of the maximal table.
    pub(crate) fn max_cardinality(&self) -> u64 {
        self.data
            .max_cardinality
            .unwrap_or_else(|| self.cardinalities.iter().copied().max().unwrap_or(0))
    }

    /// What identifies the experiment in its study: everything but how to
    /// reach and restart the server (which may change between sessions).
    pub(crate) fn identity(&self) -> serde_json::Value {
        let mut s = self.clone();
        s.connection.clear();
        s.restart_cmd = None;
        s.backoff = None;
        s.name = None;
        serde_json::to_value(s).unwrap_or_default()
    }
}

/// The value given to PostgreSQL's `setseed` (which takes −1 … 1) for a
/// recorded integer seed: seed / 2³¹.
pub(crate) fn setseed_arg(seed: u64) -> f64 {
    (seed % (1 << 31)) as f64 / (1u64 << 31) as f64
}

fn count(s: &Session, table: &str) -> Result<u64, PgError> {
    let sql = format!("SELECT count(*) FROM {table}");
    Ok(s.scalar(&sql)?.and_then(|v| v.parse().ok()).unwrap_or(0))
}

/// Whether the maximal table exists with at least the rows it needs.
pub(crate) fn max_table_ready(s: &Session, spec: &Spec) -> Result<bool, PgError> {
    let exists = s
        .scalar(&format!(
            "SELECT to_regclass('{}') IS NOT NULL",
            spec.data.max_table
        ))?
        .is_some_and(|v| v == "t");
    Ok(exists && count(s, &spec.data.max_table)? >= spec.max_cardinality())
}

/// Generates the maximal table once, with the seed (Sec. 3.2.1: "retaining
/// the random number seeds in the collected data").
pub(crate) fn build_max_table(s: &Session, spec: &Spec, seed: u64) -> Result<u64, PgError> {
    let d = &spec.data;
    let select = d
        .generate
        .replace("{max_cardinality}", &spec.max_cardinality().to_string());
    s.batch(&format!("DROP TABLE IF EXISTS {}", d.max_table))?;
    // The same session: random() follows setseed until it disconnects.
    s.batch(&format!("SELECT setseed({})", setseed_arg(seed)))?;
    s.batch(&format!("CREATE TABLE {} AS {select}", d.max_table))?;
    count(s, &d.max_table)
}

/// Creates the variable table at `cardinality` (Sec. 3.2.1: `SELECT …
/// INTO` from the maximal table), then VACUUM ANALYZE (statistics for the
/// planner, hint bits set so no QE writes them) and a checkpoint (no dirty
/// page left for the checkpointer to write during a QE). Returns its rows.
pub(crate) fn populate_table(s: &Session, spec: &Spec, cardinality: u64) -> Result<u64, PgError> {
    let d = &spec.data;
    s.batch(&format!("DROP TABLE IF EXISTS {}", d.table))?;
    // A synchronized scan could start the copy mid-table.
    s.batch("SET synchronize_seqscans = off")?;
    let sql = d
        .populate
        .replace("{table}", &d.table)
        .replace("{max_table}", &d.max_table)
        .replace("{cardinality}", &cardinality.to_string());
    s.batch(&sql)?;
    s.batch(&format!("VACUUM ANALYZE {}", d.table))?;
    if let Err(e) = s.batch("CHECKPOINT") {
        log::warn!("CHECKPOINT after populating {}: {e}", d.table);
    }
    count(s, &d.table)
}

/// What the maximal table was made from (generate, rows, seed), kept as
/// its comment so that a host which measures the Q@Cs of a spec one at a
/// time (a lab worker) rebuilds it only when another spec made it.
pub(crate) fn max_table_mark(spec: &Spec, seed: u64) -> String {
    use sha2::{Digest, Sha256};
    let made = format!("{}\n{}\n{seed}", spec.data.generate, spec.max_cardinality());
    let h: String = Sha256::digest(made.as_bytes())
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("ttp maximal table {h}")
}

/// Makes the variable table of `spec` at `cardinality` on this DBMS under
/// test, as `experiment` does before the Q@Cs of a cardinality: the
/// maximal table (generated from the recorded seed, Sec. 3.2.1) when it
/// is missing or was made from anything else, then the variable table.
/// Errors are one line: what failed and what to fix.
pub(crate) fn prepare_cardinality(
    s: &Session,
    spec: &Spec,
    cardinality: u64,
) -> Result<(), String> {
    let seed = spec.data.seed.unwrap_or(0);
    let mark = max_table_mark(spec, seed);
    let d = &spec.data;
    let pg = |e: PgError| e.to_string();
    let have = s
        .scalar(&format!(
            "SELECT obj_description(to_regclass('{}'), 'pg_class')",
            d.max_table
        ))
        .map_err(pg)?;
    if have.as_deref() != Some(mark.as_str()) || !max_table_ready(s, spec).map_err(pg)? {
        let rows = build_max_table(s, spec, seed).map_err(pg)?;
        if rows < spec.max_cardinality() {
            return Err(format!(
                "data.generate made {rows} rows, fewer than the {} needed; use {{max_cardinality}} in it",
                spec.max_cardinality()
            ));
        }
        s.batch(&format!("COMMENT ON TABLE {} IS '{mark}'", d.max_table))
            .map_err(pg)?;
    }
    let rows = populate_table(s, spec, cardinality).map_err(pg)?;
    if rows != cardinality {
        return Err(format!(
            "data.populate made {rows} rows at cardinality {cardinality}; it must make exactly {{cardinality}}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"
connection = "host=/tmp port=5432 user=me dbname=db"
n = 6
cardinalities = [1000, 4000, 2000]

[data]
seed = 7
generate = "SELECT g AS id FROM generate_series(1, {max_cardinality}) g"

[[query]]
name = "q1"
sql = "SELECT count(*) FROM ttp_var"
"#;

    /// Catches defaults that drift from the documented ones (the variable
    /// table populated by SELECT … INTO … LIMIT, the maximal cardinality
    /// the largest listed).
    #[test]
    fn parses_with_defaults() {
        let s = Spec::parse(SPEC).unwrap();
        assert_eq!(s.n, 6);
        assert!(!s.cold_cache);
        assert_eq!(s.max_cardinality(), 4000);
        assert_eq!(s.data.max_table, "ttp_max");
        assert_eq!(s.data.table, "ttp_var");
        assert!(s.data.populate.starts_with("SELECT * INTO {table}"));
        assert_eq!(s.queries[0].name, "q1");
    }

    /// Catches specifications that would fail mid-experiment (or inject
    /// SQL through a table name) being accepted.
    #[test]
    fn rejects_bad_specs() {
        let cases = [
            SPEC.replace("n = 6", "n = 0"),
            SPEC.replace("[1000, 4000, 2000]", "[]"),
            SPEC.replace("[1000, 4000, 2000]", "[1000, 1000]"),
            SPEC.replace("seed = 7", "seed = 7\ntable = \"x; DROP TABLE y\""),
            SPEC.replace("seed = 7", "seed = 7\nmax_cardinality = 10"),
            SPEC.replace("seed = 7", "seed = 4294967296"),
            SPEC.replace("name = \"q1\"", "name = \"\""),
            SPEC.replace("n = 6", "n = 6\nbackoff = \"soon\""),
            SPEC.replace("n = 6", "n = 6\ncolour = 1"),
            SPEC.to_string() + "\n[[query]]\nname = \"q1\"\nsql = \"SELECT 1\"\n",
        ];
        for text in &cases {
            assert!(Spec::parse(text).is_err(), "accepted:\n{text}");
        }
    }

    /// Catches a resume refused because the server moved (a new port), or
    /// allowed after the data or queries changed.
    #[test]
    fn identity_ignores_how_to_reach_the_server() {
        let a = Spec::parse(SPEC).unwrap();
        let mut b = a.clone();
        b.connection = "host=/other port=1".into();
        b.backoff = Some("1s".into());
        assert_eq!(a.identity(), b.identity());
        b.queries[0].sql = "SELECT 2".into();
        assert_ne!(a.identity(), b.identity());
    }

    /// Hand-computed: setseed takes [-1, 1]; seed / 2^31.
    #[test]
    fn seed_maps_into_setseed_range() {
        assert_eq!(setseed_arg(0), 0.0);
        assert_eq!(setseed_arg(1 << 30), 0.5);
        assert!(setseed_arg((1 << 31) - 1) < 1.0);
    }
}
