//! A lab experiment spec: commands to time with TTPv2's `run`, each on
//! every host label (docs/lab.md, "Specs"), and its expansion into tasks.
//! The spec is stored as canonical JSON with its SHA-256, which is how a
//! resubmission is told apart from a changed spec.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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
}

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
pub const QUERY_LABEL: &str = "query";

fn default_n() -> u32 {
    10
}

/// One task of the queue: a command on one host label.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSpec {
    pub key: String,
    pub host_label: String,
    pub command: CommandSpec,
}

impl LabSpec {
    /// Reads and checks a spec; the error is one line saying what to fix.
    pub fn parse(text: &str) -> Result<LabSpec, String> {
        // `experiment`'s PostgreSQL spec (queries × cardinalities) is
        // recognised by its own keys and named, not met with "unknown
        // field".
        if let Ok(table) = text.parse::<toml::Table>()
            && ["query", "cardinalities", "data"]
                .iter()
                .any(|k| table.contains_key(*k))
        {
            return Err(
                "this is an `experiment` spec (queries × cardinalities); lab submit takes command specs ([[command]] name, argv, n) so far".into(),
            );
        }
        let spec: LabSpec = toml::from_str(text).map_err(|e| {
            e.to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })?;
        if spec.name.trim().is_empty() {
            return Err("`name` is empty: give the experiment a name".into());
        }
        if spec.hosts.is_empty() || spec.hosts.iter().any(|h| h.trim().is_empty()) {
            return Err("`hosts` must list at least one non-empty host label".into());
        }
        if spec.command.is_empty() {
            return Err(
                "no [[command]]: lab submit takes command specs ([[command]] name, argv, n)".into(),
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
    pub fn canonical_json(&self) -> String {
        serde_json::to_string(self).expect("a spec serialises")
    }

    /// SHA-256 of [`Self::canonical_json`], in hex.
    pub fn hash(&self) -> String {
        Sha256::digest(self.canonical_json().as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The command whose Q@C this is: its name is the `command` label,
    /// else its argv and labels are the Q@C's (labels other than the host
    /// label).
    pub fn command_of(
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

    /// One task per command × host label.
    pub fn tasks(&self) -> Vec<TaskSpec> {
        self.command
            .iter()
            .flat_map(|c| {
                self.hosts.iter().map(|h| TaskSpec {
                    key: c.name.clone(),
                    host_label: h.clone(),
                    command: c.clone(),
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
        assert_eq!(t[2].command.n, 10, "n defaults to run's 10");
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
                "`experiment` spec",
            ),
        ] {
            let e = LabSpec::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
