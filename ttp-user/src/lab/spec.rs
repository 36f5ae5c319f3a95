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
