//! A study file: every Q@C of an experiment (Fig. 2), one JSON object per
//! line, appended as each Q@C completes, so an interrupted experiment keeps
//! what it finished and resumes after it.
//!
//! Line 1 is the header (`"schema": "ttp.study/1"`, `"kind": "header"`):
//! the experiment's specification (with its recorded random seed) and the
//! machine. Every further line is `"kind": "qc"`: one Q@C's raw measurements
//! (the fields `analyze` reads from a run JSON: labels, command, setup,
//! qes) plus optional DBMS facts. A line cut short by a crash (no final
//! newline) is not a Q@C: readers skip it, [`Study::open`] removes it.
use std::{
    fs::{File, OpenOptions},
    io::Write,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use super::model::QcInput;
use ttp_ledger::collect::machine::MachineFacts;

pub const STUDY_SCHEMA: &str = "ttp.study/1";

#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}, line {line}: not a study line: {source}")]
    Json {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("{path}: not a study file (its first line has no \"schema\": \"{STUDY_SCHEMA}\")")]
    NotStudy { path: PathBuf },
    #[error(
        "{path} already exists; resume it with the same specification or choose another study file"
    )]
    Exists { path: PathBuf },
}

/// The first line of a study.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StudyHeader {
    pub schema: String,
    pub kind: String,
    /// The experiment's specification as run (seed included).
    pub spec: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineFacts>,
    #[serde(default)]
    pub created_unix_ns: u64,
}

/// One finished Q@C.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StudyQc {
    pub kind: String,
    #[serde(flatten)]
    pub qc: QcInput,
    /// What the DBMS driver recorded beside (e.g. the `postgres` facts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<serde_json::Value>,
}

impl StudyQc {
    pub fn new(qc: QcInput, postgres: Option<serde_json::Value>) -> Self {
        StudyQc {
            kind: "qc".into(),
            qc,
            postgres,
        }
    }
}

/// A study opened for appending.
pub struct Study {
    path: PathBuf,
    file: File,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StudyError + '_ {
    move |source| StudyError::Io {
        path: path.into(),
        source,
    }
}

impl Study {
    /// Creates `path` with its header; refuses an existing file.
    pub fn create(path: &Path, header: &StudyHeader) -> Result<Study, StudyError> {
        let mut file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => StudyError::Exists { path: path.into() },
                _ => StudyError::Io {
                    path: path.into(),
                    source: e,
                },
            })?;
        // Appended to in place (not atomic writes), so given to the
        // invoking user here, once.
        ttp_sys::sys::atomic::give_to_invoker(&file, path);
        let line = serde_json::to_string(header).map_err(|e| StudyError::Json {
            path: path.into(),
            line: 1,
            source: e,
        })?;
        file.write_all(format!("{line}\n").as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(io(path))?;
        Ok(Study {
            path: path.into(),
            file,
        })
    }

    /// Opens an existing study to append to it: removes a last line cut
    /// short by a crash, returns the header and the finished Q@Cs.
    pub fn open(path: &Path) -> Result<(Study, StudyHeader, Vec<StudyQc>), StudyError> {
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        let complete = text.rfind('\n').map_or(0, |i| i + 1);
        if complete < text.len() {
            let f = OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io(path))?;
            f.set_len(complete as u64).map_err(io(path))?;
            log::warn!(
                "{}: removed an incomplete last line ({} bytes) left by an interrupted write",
                path.display(),
                text.len() - complete
            );
        }
        let (header, qcs) = parse(path, &text[..complete])?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io(path))?;
        Ok((
            Study {
                path: path.into(),
                file,
            },
            header,
            qcs,
        ))
    }

    /// Appends one finished Q@C as one line, written with one call and
    /// synced, so a crash leaves either the whole line or a cut one.
    pub fn append(&mut self, qc: &StudyQc) -> Result<(), StudyError> {
        let line = serde_json::to_string(qc).map_err(|e| StudyError::Json {
            path: self.path.clone(),
            line: 0,
            source: e,
        })?;
        self.file
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| self.file.sync_data())
            .map_err(io(&self.path))
    }
}

fn parse(path: &Path, text: &str) -> Result<(StudyHeader, Vec<StudyQc>), StudyError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, first)) = lines.next() else {
        return Err(StudyError::NotStudy { path: path.into() });
    };
    let header: StudyHeader = serde_json::from_str(first)
        .ok()
        .filter(|h: &StudyHeader| h.schema == STUDY_SCHEMA)
        .ok_or_else(|| StudyError::NotStudy { path: path.into() })?;
    let mut qcs = Vec::new();
    for (i, l) in lines {
        let qc: StudyQc = serde_json::from_str(l).map_err(|e| StudyError::Json {
            path: path.into(),
            line: i + 1,
            source: e,
        })?;
        qcs.push(qc);
    }
    Ok((header, qcs))
}

/// Whether `path` starts like a study file.
pub fn is_study(path: &Path) -> bool {
    use std::io::BufRead;
    let Ok(f) = File::open(path) else {
        return false;
    };
    let mut first = String::new();
    if std::io::BufReader::new(f).read_line(&mut first).is_err() {
        return false;
    }
    serde_json::from_str::<serde_json::Value>(&first)
        .ok()
        .is_some_and(|v| v["schema"] == STUDY_SCHEMA)
}

/// Reads a study as it is written: the header and every finished Q@C
/// line. A cut last line is skipped (the file is not changed).
pub fn read_lines(path: &Path) -> Result<(StudyHeader, Vec<StudyQc>), StudyError> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    let complete = text.rfind('\n').map_or(0, |i| i + 1);
    parse(path, &text[..complete])
}

/// Reads a study for analysis: its Q@Cs (each named after the file) and
/// the machine. A cut last line is skipped.
pub fn read_study(path: &Path) -> Result<(Vec<QcInput>, Option<MachineFacts>), StudyError> {
    let (header, qcs) = read_lines(path)?;
    let qcs = qcs
        .into_iter()
        .map(|l| {
            let mut qc = l.qc;
            qc.source.get_or_insert_with(|| path.display().to_string());
            qc
        })
        .collect();
    Ok((qcs, header.machine))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::clean_qc;

    fn header() -> StudyHeader {
        StudyHeader {
            schema: STUDY_SCHEMA.into(),
            kind: "header".into(),
            spec: serde_json::json!({"n": 7, "seed": 42}),
            machine: Some(MachineFacts {
                cores: Some(2),
                ..MachineFacts::default()
            }),
            created_unix_ns: 1,
        }
    }

    fn at(card: &str) -> QcInput {
        let mut qc = clean_qc(7);
        qc.labels.insert("query".into(), "q1".into());
        qc.labels.insert("cardinality".into(), card.into());
        qc
    }

    /// Catches Q@Cs lost or altered between appending and reading back,
    /// a crash's cut last line taken for data, and resuming a study that
    /// then appends after the cut line instead of replacing it.
    #[test]
    fn append_crash_resume_and_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut s = Study::create(&path, &header()).unwrap();
        s.append(&StudyQc::new(
            at("1000"),
            Some(serde_json::json!({"rows": 1})),
        ))
        .unwrap();
        drop(s);
        assert!(matches!(
            Study::create(&path, &header()),
            Err(StudyError::Exists { .. })
        ));
        // A crash in the middle of the second line.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"kind\":\"qc\",\"labels\":{\"card").unwrap();
        drop(f);
        assert!(is_study(&path));
        let (qcs, machine) = read_study(&path).unwrap();
        assert_eq!(qcs.len(), 1, "the cut line is not a Q@C");
        assert_eq!(machine.unwrap().cores, Some(2));
        let (mut s, h, done) = Study::open(&path).unwrap();
        assert_eq!(h, header());
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].qc.qes, at("1000").qes);
        assert_eq!(done[0].postgres.as_ref().unwrap()["rows"], 1);
        s.append(&StudyQc::new(at("2000"), None)).unwrap();
        let (qcs, _) = read_study(&path).unwrap();
        let cards: Vec<&str> = qcs
            .iter()
            .map(|q| q.labels["cardinality"].as_str())
            .collect();
        assert_eq!(cards, ["1000", "2000"]);
        assert!(qcs[0].source.as_deref().unwrap().ends_with("s.jsonl"));
    }

    /// Catches a run JSON (or anything else) read as a study.
    #[test]
    fn other_files_are_not_studies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, "{\"schema\":\"ttp.run/1\",\"qes\":[]}\n").unwrap();
        assert!(!is_study(&path));
        assert!(matches!(
            read_study(&path),
            Err(StudyError::NotStudy { .. })
        ));
    }
}
