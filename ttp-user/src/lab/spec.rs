//! A lab experiment spec: commands to time with TTPv2's `run`, or
//! `experiment`'s PostgreSQL queries × cardinalities, each on every host
//! label (docs/lab.md, "Specs"), and its expansion into tasks. The spec is
//! stored as canonical JSON with its SHA-256, which is how a resubmission
//! is told apart from a changed spec.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::pg::experiment::{QuerySpec, Spec as PgSpec};

/// `SPEC.toml` of `lab submit`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabSpec {
    /// The experiment's name, unique in the lab.
    pub name: String,
    /// Host labels: every command runs once on a worker of each.
    pub hosts: Vec<String>,
    /// The commands, each one Q@C of `run`.
    #[serde(default)]
    pub command: Vec<CommandSpec>,
    /// `experiment`'s PostgreSQL spec (queries × cardinalities), each Q@C
    /// one task; absent from a command spec's JSON, whose hash stays what
    /// it was before query specs were accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<PgSpec>,
    /// A queue-only experiment (`cargo xtask bench lab`): its tasks are
    /// claimed only by `lab worker --no-run`, which finishes them without
    /// running anything, and an ordinary worker never claims them, so a
    /// no-run worker pointed at a real lab cannot end a real task
    /// (docs/lab.md, "No-run experiments"). Absent from the JSON of every
    /// other spec, whose hash stays what it was.
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_run: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The key of [`LabSpec::no_run`] in a spec and in its stored JSON.
pub(crate) const NO_RUN_KEY: &str = "no_run";

/// One `[[command]]`: a Q@C of `ttp-ebpf run -n N [--cold-cache] -- ARGV`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    pub name: String,
    pub argv: Vec<String>,
    /// Executions (QEs) of the Q@C.
    #[serde(default = "default_n")]
    pub n: u32,
    #[serde(default)]
    pub cold_cache: bool,
    /// KEY=VALUE labels of the Q@C (`run --label`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// The label that names a command's query: commands with it are labelled
/// by their labels alone (not `command=NAME`), so that one query's
/// commands at several cardinalities are grouped for the monotonicity
/// checks.
pub(crate) const QUERY_LABEL: &str = "query";

fn default_n() -> u32 {
    10
}

/// One query at one cardinality of a query spec: what a worker needs to
/// populate its DBMS under test and measure the Q@C with `run --postgres`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryTask {
    pub query: QuerySpec,
    pub cardinality: u64,
    /// The experiment's spec: connection, data section, n, cold_cache,
    /// timeouts.
    pub experiment: PgSpec,
}

impl QueryTask {
    /// The Q@C's labels, as `experiment` gives them (TTPv2 Fig. 2: one
    /// query at one cardinality).
    pub(crate) fn labels(&self) -> BTreeMap<String, String> {
        [
            (QUERY_LABEL.to_string(), self.query.name.clone()),
            (CARDINALITY_LABEL.to_string(), self.cardinality.to_string()),
        ]
        .into()
    }
}

/// The label that names a query's cardinality.
pub(crate) const CARDINALITY_LABEL: &str = "cardinality";

/// What a task runs, as stored in its payload. A command task's payload
/// is the command itself, as it always was.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Payload {
    Query(Box<QueryTask>),
    Command(CommandSpec),
}

/// One task of the queue: a command, or a query at a cardinality, on one
/// host label.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TaskSpec {
    pub key: String,
    pub host_label: String,
    pub payload: Payload,
}

/// The task key of a query at a cardinality: its labels as a Q@C name
/// (`cardinality=1000 query=q1`), the key `lab import` gives such a Q@C.
pub(crate) fn query_key(q: &QueryTask) -> String {
    ttp_ttpv2::model::qc_name(&q.labels(), None)
}

/// Keys of an `experiment` spec, which a query spec is.
const QUERY_SPEC_KEYS: [&str; 3] = ["query", "cardinalities", "data"];

/// A query spec: `experiment`'s TOML with `name` and `hosts`. The seed of
/// the maximal table, when the spec gives none, is drawn from the spec
/// itself (its hash), so that every host generates the same data (TTPv2
/// Sec. 3.2.1) and the same text submitted again is the same experiment.
fn parse_query_spec(mut table: toml::Table) -> Result<LabSpec, String> {
    let hosts = table
        .remove("hosts")
        .ok_or("`hosts` is missing: list the host labels the queries run on")?;
    let hosts: Vec<String> = hosts
        .try_into()
        .map_err(|_| "`hosts` must be a list of host labels".to_string())?;
    let name = match table.get("name") {
        Some(toml::Value::String(s)) => s.clone(),
        Some(_) => return Err("`name` must be a string".into()),
        None => return Err("`name` is missing: give the experiment a name".into()),
    };
    if table.contains_key("command") {
        return Err("a spec holds either [[command]]s or queries × cardinalities, not both".into());
    }
    if table.contains_key(NO_RUN_KEY) {
        return Err("`no_run` marks a queue benchmark of [[command]]s (`cargo xtask bench lab`), not a spec of queries × cardinalities".into());
    }
    let mut pg = PgSpec::from_table(table).map_err(|e| one_line(&e.to_string()))?;
    let conn =
        crate::pg::session::parse_config(&pg.connection).map_err(|e| one_line(&e.to_string()))?;
    if conn.get_password().is_some() {
        return Err(
            "`connection` holds a password, which the lab would store and show: give it to each worker's `lab worker --postgres` instead".into(),
        );
    }
    pg.name = None;
    if pg.data.seed.is_none() {
        let unseeded = LabSpec {
            name: name.clone(),
            hosts: hosts.clone(),
            command: Vec::new(),
            postgres: Some(pg.clone()),
            no_run: false,
        };
        let h = Sha256::digest(unseeded.canonical_json().as_bytes());
        let seed = u32::from_be_bytes([h[0], h[1], h[2], h[3]]) & 0x7fff_ffff;
        pg.data.seed = Some(u64::from(seed));
    }
    Ok(LabSpec {
        name,
        hosts,
        command: Vec::new(),
        postgres: Some(pg),
        no_run: false,
    })
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl LabSpec {
    /// Reads and checks a spec; the error is one line saying what to fix.
    pub fn parse(text: &str) -> Result<LabSpec, String> {
        // `experiment`'s PostgreSQL spec (queries × cardinalities) is
        // recognised by its own keys.
        let spec = match text.parse::<toml::Table>() {
            Ok(table) if QUERY_SPEC_KEYS.iter().any(|k| table.contains_key(*k)) => {
                parse_query_spec(table)?
            }
            _ => {
                let spec: LabSpec = toml::from_str(text).map_err(|e| one_line(&e.to_string()))?;
                if spec.postgres.is_some() {
                    return Err("`postgres` is no key of a spec: write the queries × cardinalities as `experiment` does ([[query]], cardinalities, [data])".into());
                }
                spec
            }
        };
        if spec.name.trim().is_empty() {
            return Err("`name` is empty: give the experiment a name".into());
        }
        if spec.hosts.is_empty() || spec.hosts.iter().any(|h| h.trim().is_empty()) {
            return Err("`hosts` must list at least one non-empty host label".into());
        }
        if spec.command.is_empty() && spec.postgres.is_none() {
            return Err(
                "no [[command]] and no [[query]]: give commands ([[command]] name, argv, n) or queries × cardinalities as `experiment` does".into(),
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        for c in &spec.command {
            if c.argv.is_empty() {
                return Err(format!("command {:?} has an empty argv", c.name));
            }
            if c.n == 0 {
                return Err(format!("command {:?}: n must be at least 1", c.name));
            }
            if !seen.insert(&c.name) {
                return Err(format!("command name {:?} is used twice", c.name));
            }
        }
        for (i, a) in spec.command.iter().enumerate() {
            if let Some(b) = spec.command[i + 1..]
                .iter()
                .find(|b| a.labels.contains_key(QUERY_LABEL) && b.labels == a.labels)
            {
                return Err(format!(
                    "commands {:?} and {:?} have the same labels; their Q@Cs would not be told apart",
                    a.name, b.name
                ));
            }
        }
        let mut hosts = std::collections::BTreeSet::new();
        if let Some(h) = spec.hosts.iter().find(|h| !hosts.insert(*h)) {
            return Err(format!("host label {h:?} is listed twice"));
        }
        Ok(spec)
    }

    /// The spec as canonical JSON (fields in declaration order, labels
    /// sorted), the text that is stored and hashed.
    pub(crate) fn canonical_json(&self) -> String {
        serde_json::to_string(self).expect("a spec serialises")
    }

    /// SHA-256 of [`Self::canonical_json`], in hex.
    pub(crate) fn hash(&self) -> String {
        Sha256::digest(self.canonical_json().as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The command whose Q@C this is: its name is the `command` label,
    /// else its argv and labels are the Q@C's (labels other than the host
    /// label).
    pub(crate) fn command_of(
        &self,
        labels: &BTreeMap<String, String>,
        argv: &[String],
    ) -> Option<&CommandSpec> {
        if let Some(name) = labels.get("command") {
            return self.command.iter().find(|c| &c.name == name);
        }
        self.command
            .iter()
            .find(|c| c.argv == argv && c.labels.iter().all(|(k, v)| labels.get(k) == Some(v)))
    }

    /// One task per command × host label, or per query × cardinality ×
    /// host label (cardinality by cardinality, in the spec's order, as
    /// `experiment` runs them).
    pub(crate) fn tasks(&self) -> Vec<TaskSpec> {
        let mut work: Vec<(String, Payload)> = self
            .command
            .iter()
            .map(|c| (c.name.clone(), Payload::Command(c.clone())))
            .collect();
        if let Some(pg) = &self.postgres {
            for &cardinality in &pg.cardinalities {
                for q in &pg.queries {
                    let t = QueryTask {
                        query: q.clone(),
                        cardinality,
                        experiment: pg.clone(),
                    };
                    work.push((query_key(&t), Payload::Query(Box::new(t))));
                }
            }
        }
        work.iter()
            .flat_map(|(key, p)| {
                self.hosts.iter().map(|h| TaskSpec {
                    key: key.clone(),
                    host_label: h.clone(),
                    payload: p.clone(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"
name = "spin"
hosts = ["nvme-16c", "hdd-4c"]
[[command]]
name = "short"
argv = ["/bin/true"]
n = 3
[[command]]
name = "long"
argv = ["/bin/sleep", "0.1"]
labels = { size = "1" }
"#;

    #[test]
    fn expands_one_task_per_command_and_host() {
        let s = LabSpec::parse(SPEC).unwrap();
        let t = s.tasks();
        assert_eq!(t.len(), 4);
        assert_eq!(
            t.iter()
                .map(|t| (t.key.as_str(), t.host_label.as_str()))
                .collect::<Vec<_>>(),
            [
                ("short", "nvme-16c"),
                ("short", "hdd-4c"),
                ("long", "nvme-16c"),
                ("long", "hdd-4c")
            ]
        );
        let Payload::Command(c) = &t[2].payload else {
            panic!("a command task")
        };
        assert_eq!(c.n, 10, "n defaults to run's 10");
    }

    /// Catches a marker that would change the hash of every spec stored
    /// before it existed, or one that resubmission could not tell apart.
    #[test]
    fn no_run_is_in_the_hash_only_when_set() {
        let a = LabSpec::parse(SPEC).unwrap();
        assert!(!a.no_run);
        assert!(!a.canonical_json().contains(NO_RUN_KEY));
        let b = LabSpec::parse(&format!("no_run = false\n{SPEC}")).unwrap();
        assert_eq!(a.hash(), b.hash());
        let c = LabSpec::parse(&format!("no_run = true\n{SPEC}")).unwrap();
        assert!(c.no_run);
        assert!(c.canonical_json().contains("\"no_run\":true"));
        assert_ne!(a.hash(), c.hash());
    }

    #[test]
    fn hash_follows_the_content_not_the_layout() {
        let a = LabSpec::parse(SPEC).unwrap();
        let b = LabSpec::parse(&SPEC.replace("n = 3", "n   =   3\n# a comment")).unwrap();
        assert_eq!(a.hash(), b.hash());
        let c = LabSpec::parse(&SPEC.replace("n = 3", "n = 4")).unwrap();
        assert_ne!(a.hash(), c.hash());
        assert_eq!(a.hash().len(), 64);
    }

    /// Catches a Q@C matched to the wrong command (or to none) on import,
    /// and two commands of one query that could not be told apart.
    #[test]
    fn a_qc_is_matched_to_its_command() {
        let text = r#"
name = "scan"
hosts = ["a"]
[[command]]
name = "s20"
argv = ["/bin/spin", "20"]
labels = { query = "spin", cardinality = "20" }
[[command]]
name = "s40"
argv = ["/bin/spin", "40"]
labels = { query = "spin", cardinality = "40" }
"#;
        let s = LabSpec::parse(text).unwrap();
        let labels = |c: &str| -> BTreeMap<String, String> {
            [("query", "spin"), ("cardinality", c), ("host_label", "a")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let argv = |c: &str| vec!["/bin/spin".to_string(), c.to_string()];
        assert_eq!(
            s.command_of(&labels("40"), &argv("40")).unwrap().name,
            "s40"
        );
        assert_eq!(
            s.command_of(&labels("20"), &argv("20")).unwrap().name,
            "s20"
        );
        assert!(s.command_of(&labels("20"), &argv("40")).is_none());
        let named: BTreeMap<String, String> = [("command".to_string(), "s20".to_string())].into();
        assert_eq!(s.command_of(&named, &[]).unwrap().name, "s20");
        let same = text.replace("cardinality = \"40\"", "cardinality = \"20\"");
        let e = LabSpec::parse(&same).unwrap_err();
        assert!(e.contains("same labels"), "{e}");
    }

    proptest::proptest! {
        /// Any text, and any truncation of a good spec, is a spec or a
        /// one-line error, never a panic.
        #[test]
        fn never_panics(text in "\\PC{0,200}", cut in 0usize..400) {
            if let Err(e) = LabSpec::parse(&text) {
                proptest::prop_assert!(!e.contains('\n'));
            }
            let cut = SPEC.char_indices().map(|(i, _)| i).take_while(|i| *i <= cut).last().unwrap_or(0);
            if let Err(e) = LabSpec::parse(&SPEC[..cut]) {
                proptest::prop_assert!(!e.contains('\n'));
            }
        }
    }

    #[test]
    fn bad_specs_are_one_line() {
        let unsafe_pw =
            format!("hosts = [\"a\"]\n{QSPEC}").replace("user=me", "user=me password=s");
        let no_n = format!("hosts = [\"a\"]\n{QSPEC}").replace("n = 6", "n = 0");
        let both =
            format!("hosts = [\"a\"]\n{QSPEC}\n[[command]]\nname=\"a\"\nargv=[\"/bin/true\"]");
        let smuggled = "name = \"x\"\nhosts = [\"a\"]\n[[command]]\nname=\"a\"\nargv=[\"/bin/true\"]\n[postgres]\nconnection = \"\"";
        for (text, needle) in [
            (
                "name = \"x\"\nhosts = []\n[[command]]\nname=\"a\"\nargv=[\"/bin/true\"]",
                "hosts",
            ),
            ("name = \"x\"\nhosts = [\"a\"]", "[[command]]"),
            (
                "name = \"x\"\nhosts = [\"a\"]\n[[command]]\nname=\"a\"\nargv=[]",
                "empty argv",
            ),
            ("name = \"x\"\nhosts = [\"a\"]\nbogus = 1", "bogus"),
            ("name = ", "line 1"),
            (
                "name = \"x\"\nconnection = \"\"\ncardinalities = [1]\n[data]\n[[query]]\nname = \"q\"\nsql = \"SELECT 1\"",
                "hosts",
            ),
            (QSPEC, "hosts"),
            (&no_n, "n must be"),
            (&unsafe_pw, "password"),
            (&both, "not both"),
            (smuggled, "postgres"),
        ] {
            let e = LabSpec::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    /// `experiment`'s spec of docs/experiment.md with the lab's `hosts`.
    const QSPEC: &str = r#"name = "scan"
connection = "host=/tmp port=5432 user=me dbname=db"
n = 6
cardinalities = [1000, 4000, 2000]

[data]
generate = "SELECT g AS id FROM generate_series(1, {max_cardinality}) g"

[[query]]
name = "q1"
sql = "SELECT count(*) FROM ttp_var"

[[query]]
name = "q2"
sql = "SELECT max(id) FROM ttp_var"
"#;

    /// Catches a query spec expanded into the wrong tasks (not one per
    /// query × cardinality × host label, or keyed other than `lab import`
    /// keys such a Q@C), and a seed that differs between two submissions
    /// of the same text (hosts would generate different data, and the
    /// resubmission would be refused as a changed spec).
    #[test]
    fn a_query_spec_is_one_task_per_query_cardinality_and_host() {
        let text = format!("hosts = [\"a\", \"b\"]\n{QSPEC}");
        let s = LabSpec::parse(&text).unwrap();
        let t = s.tasks();
        assert_eq!(t.len(), 2 * 3 * 2);
        assert_eq!(t[0].key, "cardinality=1000 query=q1");
        assert_eq!(t[0].host_label, "a");
        assert_eq!(t[1].host_label, "b");
        assert_eq!(t[11].key, "cardinality=2000 query=q2");
        let Payload::Query(q) = &t[11].payload else {
            panic!("a query task")
        };
        assert_eq!(
            (q.query.name.as_str(), q.cardinality, q.experiment.n),
            ("q2", 2000, 6)
        );
        let seed = s.postgres.as_ref().unwrap().data.seed.unwrap();
        assert!(seed < 1 << 31);
        let again = LabSpec::parse(&text).unwrap();
        assert_eq!(again.hash(), s.hash());
        let seeded = LabSpec::parse(&text.replace("[data]", "[data]\nseed = 7")).unwrap();
        assert_eq!(seeded.postgres.unwrap().data.seed, Some(7));
        let other = LabSpec::parse(&text.replace("max(id)", "min(id)")).unwrap();
        assert_ne!(other.hash(), s.hash());
        // A queue benchmark is a command spec.
        let e = LabSpec::parse(&format!("no_run = true\n{text}")).unwrap_err();
        assert!(e.contains("no_run"), "{e}");
        // The payload reads back as what it was, and an old command
        // payload still reads as a command.
        let json = serde_json::to_string(&t[11].payload).unwrap();
        assert_eq!(
            serde_json::from_str::<Payload>(&json).unwrap(),
            t[11].payload
        );
        let old = r#"{"name":"x","argv":["/bin/true"],"n":3,"cold_cache":false,"labels":{}}"#;
        assert!(matches!(
            serde_json::from_str::<Payload>(old).unwrap(),
            Payload::Command(_)
        ));
    }

    /// A command spec's stored JSON (and so the hash a lab already holds
    /// for it) has no trace of query specs.
    #[test]
    fn a_command_spec_keeps_its_json() {
        let s = LabSpec::parse(SPEC).unwrap();
        assert!(!s.canonical_json().contains("postgres"));
    }
}
