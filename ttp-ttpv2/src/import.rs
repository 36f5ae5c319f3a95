//! Reading measured data back: saved run JSONs (`ttp.run/1`) and external
//! measurements in CSV, one row per QE.
//!
//! CSV columns (header names, any order):
//! - required: `qe`, `time_meas_ms`, `u_ticks`, `s_ticks`, `blkio_ticks`
//!   (the query process) and `iowait_ticks` (overall /proc/stat iowait);
//! - grouping: `query`, `cardinality` (rows with the same pair form one
//!   Q@C, labelled with them);
//! - per QE: `timed_out` (true/false/1/0), `exit_code`, `plan`, `ephemeral`
//!   (count of ephemeral processes), `time_meas_ns`;
//! - more query measures, unprefixed: any name of [`MEASURE_COLUMNS`] or
//!   [`LedgerColumns::NAMES`];
//! - utility, executor and daemon totals: `utility_`, `executor_` or
//!   `daemon_` followed by `u_ticks`, `s_ticks`, `su_ticks` (U + S when only
//!   the sum is known), `blkio_ticks` or any name of [`MEASURE_COLUMNS`] or
//!   [`LedgerColumns::NAMES`];
//! - overall: `overall_` followed by a name of [`OVERALL_COLUMNS`].
//!
//! An empty cell is a measure not known. Unknown columns are refused, so a
//! misspelt header is not silently ignored.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::analysis::{RUN_SCHEMA, SavedRun};
use super::model::{CARDINALITY_LABEL, QcInput, Setup};
use ttp_ledger::accounts::LedgerColumns;
use ttp_ledger::collect::machine::MachineFacts;
use ttp_window::window::record::{
    Measures, OverallMeasures, ProcessClass, ProcessDetail, ProcessMeasures, QeRecord,
};

/// Measure columns besides U, S and BlockIO ticks and the ledger's
/// ([`LedgerColumns::NAMES`]).
pub(crate) const MEASURE_COLUMNS: &[&str] = &[
    "guest_ticks",
    "cguest_ticks",
    "minflt",
    "majflt",
    "vol_cs",
    "invol_cs",
    "read_syscalls",
    "write_syscalls",
    "u_ns",
    "s_ns",
    "blkio_ns",
];

/// Overall columns, after the `overall_` prefix.
pub(crate) const OVERALL_COLUMNS: &[&str] = &[
    "user_ticks",
    "nice_ticks",
    "system_ticks",
    "idle_ticks",
    "irq_ticks",
    "softirq_ticks",
    "steal_ticks",
    "guest_ticks",
    "guest_nice_ticks",
    "forks",
    "iowait_ns",
];

const REQUIRED: [&str; 6] = [
    "qe",
    "time_meas_ms",
    "u_ticks",
    "s_ticks",
    "blkio_ticks",
    "iowait_ticks",
];
const OTHER_CLASSES: [ProcessClass; 3] = [
    ProcessClass::Utility,
    ProcessClass::Executor,
    ProcessClass::Daemon,
];

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a valid CSV file: {source}")]
    Csv { path: PathBuf, source: csv::Error },
    #[error("{path}: required column `{column}` is missing (required: {})", REQUIRED.join(","))]
    MissingColumn { path: PathBuf, column: &'static str },
    #[error("{path}: unknown column `{column}`; see docs/ttpv2.md for the column names")]
    UnknownColumn { path: PathBuf, column: String },
    #[error("{path}, line {line}: `{column}` = {value:?} is not {expected}")]
    BadValue {
        path: PathBuf,
        line: u64,
        column: String,
        value: String,
        expected: &'static str,
    },
    #[error("{path}, line {line}: required `{column}` is empty")]
    Empty {
        path: PathBuf,
        line: u64,
        column: &'static str,
    },
    #[error("{path}: QE {qe} appears twice in Q@C {qc}; give each row of a Q@C its own qe number")]
    DuplicateQe { path: PathBuf, qe: u32, qc: String },
    #[error("{path}: no rows")]
    NoRows { path: PathBuf },
    #[error(
        "{path} is truncated: its JSON ends at byte {len} before the document does; give the complete file"
    )]
    Truncated { path: PathBuf, len: usize },
    #[error("{path} is empty: give a file written by `ttp-ebpf run --json`")]
    EmptyFile { path: PathBuf },
    #[error("{path}: not a ttp run JSON: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "{path}: schema is {found:?}, expected {RUN_SCHEMA:?}; analyze reads files written by `ttp-ebpf run --json`"
    )]
    Schema { path: PathBuf, found: String },
}

/// Reads a run JSON written by `ttp-ebpf run --json`.
pub fn read_run_json(path: &Path) -> Result<(QcInput, Option<MachineFacts>), ImportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ImportError::Io {
        path: path.into(),
        source,
    })?;
    let saved: SavedRun = serde_json::from_str(&text).map_err(|source| {
        let path = path.into();
        if text.trim().is_empty() {
            ImportError::EmptyFile { path }
        } else if source.is_eof() {
            ImportError::Truncated {
                path,
                len: text.len(),
            }
        } else {
            ImportError::Json { path, source }
        }
    })?;
    if saved.schema != RUN_SCHEMA {
        return Err(ImportError::Schema {
            path: path.into(),
            found: saved.schema,
        });
    }
    let (mut qc, machine) = saved.into_input();
    qc.source.get_or_insert_with(|| path.display().to_string());
    Ok((qc, machine))
}

fn set_measure(m: &mut Measures, name: &str, v: u64) -> bool {
    let slot = match name {
        "u_ticks" => &mut m.u_ticks,
        "s_ticks" => &mut m.s_ticks,
        "su_ticks" => &mut m.su_ticks,
        "blkio_ticks" => &mut m.blkio_ticks,
        "guest_ticks" => &mut m.guest_ticks,
        "cguest_ticks" => &mut m.cguest_ticks,
        "minflt" => &mut m.minflt,
        "majflt" => &mut m.majflt,
        "vol_cs" => &mut m.vol_cs,
        "invol_cs" => &mut m.invol_cs,
        "read_syscalls" => &mut m.read_syscalls,
        "write_syscalls" => &mut m.write_syscalls,
        "u_ns" => &mut m.u_ns,
        "s_ns" => &mut m.s_ns,
        "blkio_ns" => &mut m.blkio_ns,
        _ => match m.ledger.slot(name) {
            Some(slot) => slot,
            None => return false,
        },
    };
    *slot = Some(v);
    true
}

fn set_overall(o: &mut OverallMeasures, name: &str, v: u64) -> bool {
    let slot = match name {
        "user_ticks" => &mut o.user_ticks,
        "nice_ticks" => &mut o.nice_ticks,
        "system_ticks" => &mut o.system_ticks,
        "idle_ticks" => &mut o.idle_ticks,
        "iowait_ticks" => &mut o.iowait_ticks,
        "irq_ticks" => &mut o.irq_ticks,
        "softirq_ticks" => &mut o.softirq_ticks,
        "steal_ticks" => &mut o.steal_ticks,
        "guest_ticks" => &mut o.guest_ticks,
        "guest_nice_ticks" => &mut o.guest_nice_ticks,
        "forks" => &mut o.forks,
        "iowait_ns" => &mut o.iowait_ns,
        _ => return false,
    };
    *slot = Some(v);
    true
}

/// What a header column means.
#[derive(Clone, Debug)]
enum Col {
    Qe,
    TimeMeasMs,
    TimeMeasNs,
    TimedOut,
    ExitCode,
    Plan,
    Ephemeral,
    Label(&'static str),
    Measure(ProcessClass, String),
    Overall(String),
}

fn classify(name: &str) -> Option<Col> {
    Some(match name {
        "qe" => Col::Qe,
        "time_meas_ms" => Col::TimeMeasMs,
        "time_meas_ns" => Col::TimeMeasNs,
        "timed_out" => Col::TimedOut,
        "exit_code" => Col::ExitCode,
        "plan" => Col::Plan,
        "ephemeral" => Col::Ephemeral,
        "query" => Col::Label("query"),
        "cardinality" => Col::Label(CARDINALITY_LABEL),
        "iowait_ticks" => Col::Overall("iowait_ticks".into()),
        _ => {
            let is_measure = |m: &str| {
                ["u_ticks", "s_ticks", "blkio_ticks"].contains(&m)
                    || (MEASURE_COLUMNS.contains(&m) || LedgerColumns::NAMES.contains(&m))
            };
            if let Some(o) = name.strip_prefix("overall_") {
                return (OVERALL_COLUMNS.contains(&o)).then(|| Col::Overall(o.into()));
            }
            for c in OTHER_CLASSES {
                if let Some(m) = name
                    .strip_prefix(c.name())
                    .and_then(|r| r.strip_prefix('_'))
                {
                    return (is_measure(m) || m == "su_ticks").then(|| Col::Measure(c, m.into()));
                }
            }
            if is_measure(name) {
                Col::Measure(ProcessClass::Query, name.into())
            } else {
                return None;
            }
        }
    })
}

/// Reads external per-QE data. Each (query, cardinality) group of rows is
/// one Q@C; `setup` gives USER_HZ and the CPU count of the machine it was
/// measured on.
pub fn read_qe_csv(path: &Path, setup: &Setup) -> Result<Vec<QcInput>, ImportError> {
    let p = || path.to_path_buf();
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|source| ImportError::Csv { path: p(), source })?;
    let headers = rdr
        .headers()
        .map_err(|source| ImportError::Csv { path: p(), source })?
        .clone();
    let cols: Vec<Col> = headers
        .iter()
        .map(|h| {
            classify(h).ok_or_else(|| ImportError::UnknownColumn {
                path: p(),
                column: h.into(),
            })
        })
        .collect::<Result<_, _>>()?;
    for column in REQUIRED {
        if !headers.iter().any(|h| h == column) {
            return Err(ImportError::MissingColumn { path: p(), column });
        }
    }
    let classes: Vec<ProcessClass> = OTHER_CLASSES
        .into_iter()
        .filter(|c| {
            cols.iter()
                .any(|col| matches!(col, Col::Measure(k, _) if k == c))
        })
        .collect();

    let mut groups: Vec<QcInput> = Vec::new();
    let mut index: BTreeMap<Vec<(&'static str, String)>, usize> = BTreeMap::new();
    for row in rdr.records() {
        let row = row.map_err(|source| ImportError::Csv { path: p(), source })?;
        let line = row.position().map_or(0, |pos| pos.line());
        let bad = |column: &str, value: &str, expected: &'static str| ImportError::BadValue {
            path: p(),
            line,
            column: column.into(),
            value: value.into(),
            expected,
        };
        let mut qe = QeRecord::new(0, 0.0);
        qe.detail = ProcessDetail::ClassTotals;
        let mut procs: BTreeMap<ProcessClass, Measures> = BTreeMap::new();
        procs.insert(ProcessClass::Query, Measures::default());
        for c in &classes {
            procs.insert(*c, Measures::default());
        }
        let mut labels = Vec::new();
        for ((cell, col), name) in row.iter().zip(&cols).zip(headers.iter()) {
            if cell.is_empty() {
                if let Some(&req) = REQUIRED.iter().find(|r| **r == name) {
                    return Err(ImportError::Empty {
                        path: p(),
                        line,
                        column: req,
                    });
                }
                continue;
            }
            let int = || {
                cell.parse::<u64>()
                    .map_err(|_| bad(name, cell, "a whole non-negative number"))
            };
            match col {
                Col::Qe => {
                    qe.qe = cell
                        .parse::<u32>()
                        .map_err(|_| bad(name, cell, "a QE number"))?;
                }
                Col::TimeMeasMs => {
                    qe.time_meas_ms = cell
                        .parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite() && *v >= 0.0)
                        .ok_or_else(|| bad(name, cell, "a non-negative number of ms"))?;
                }
                Col::TimeMeasNs => qe.time_meas_ns = Some(int()?),
                Col::TimedOut => {
                    qe.timed_out = Some(match cell.to_ascii_lowercase().as_str() {
                        "true" | "1" | "yes" => true,
                        "false" | "0" | "no" => false,
                        _ => return Err(bad(name, cell, "true or false")),
                    })
                }
                Col::ExitCode => {
                    qe.exit_code = Some(
                        cell.parse::<i32>()
                            .map_err(|_| bad(name, cell, "an exit code"))?,
                    )
                }
                Col::Plan => qe.plan = Some(cell.to_string()),
                Col::Ephemeral => {
                    qe.ephemeral_count = Some(
                        cell.parse::<u32>()
                            .map_err(|_| bad(name, cell, "a count"))?,
                    )
                }
                Col::Label(k) => labels.push((*k, cell.to_string())),
                Col::Measure(class, m) => {
                    let v = int()?;
                    set_measure(procs.entry(*class).or_default(), m, v);
                }
                Col::Overall(o) => {
                    let v = int()?;
                    set_overall(&mut qe.overall, o, v);
                }
            }
        }
        qe.processes = procs
            .into_iter()
            .map(|(class, m)| ProcessMeasures {
                pid: None,
                start_time_ns: None,
                comm: class.name().into(),
                class,
                stopped: false,
                m,
            })
            .collect();
        let i = *index.entry(labels.clone()).or_insert_with(|| {
            groups.push(QcInput {
                labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
                source: Some(path.display().to_string()),
                command: Vec::new(),
                setup: setup.clone(),
                qes: Vec::new(),
            });
            groups.len() - 1
        });
        let g = &mut groups[i];
        if g.qes.iter().any(|q| q.qe == qe.qe) {
            return Err(ImportError::DuplicateQe {
                path: p(),
                qe: qe.qe,
                qc: g.name(),
            });
        }
        g.qes.push(qe);
    }
    if groups.is_empty() {
        return Err(ImportError::NoRows { path: p() });
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary file, removed (with its directory, once empty) on drop.
    struct Tmp(PathBuf);

    impl std::ops::Deref for Tmp {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
            if let Some(dir) = self.0.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }

    fn write(name: &str, text: &str) -> Tmp {
        // A directory of its own: tests run at once, and each removes its
        // directory when done.
        let dir =
            std::env::temp_dir().join(format!("ttp-ttpv2-import-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        Tmp(path)
    }

    /// Catches a column mapped to the wrong class or measure.
    #[test]
    fn columns_map_to_classes() {
        let path = write(
            "map.csv",
            "qe,time_meas_ms,u_ticks,s_ticks,blkio_ticks,iowait_ticks,vol_cs,daemon_su_ticks,utility_blkio_ticks,overall_softirq_ticks,timed_out,query,cardinality\n\
             1,100.5,7,2,3,1,40,5,6,2,false,q,10\n\
             2,101,7,2,3,4,40,5,6,,1,q,20\n",
        );
        let qcs = read_qe_csv(&path, &Setup::default()).unwrap();
        assert_eq!(qcs.len(), 2, "two cardinalities, two Q@Cs");
        let qe = &qcs[0].qes[0];
        assert_eq!(qe.time_meas_ms, 100.5);
        let q = qe.query().unwrap();
        assert_eq!(
            (q.u_ticks, q.s_ticks, q.blkio_ticks, q.vol_cs),
            (Some(7), Some(2), Some(3), Some(40))
        );
        assert_eq!(qe.class_totals(ProcessClass::Daemon).su_ticks(), Some(5));
        assert_eq!(qe.class_totals(ProcessClass::Utility).blkio_ticks, Some(6));
        assert_eq!(qe.overall.iowait_ticks, Some(1));
        assert_eq!(qe.overall.softirq_ticks, Some(2));
        assert_eq!(qe.timed_out, Some(false));
        assert_eq!(
            qcs[1].qes[0].overall.softirq_ticks, None,
            "an empty cell is unknown, not 0"
        );
        assert_eq!(qcs[1].qes[0].timed_out, Some(true));
        assert_eq!(
            qcs[1].labels.get("cardinality").map(String::as_str),
            Some("20")
        );
        assert_eq!(qcs[1].labels.get("query").map(String::as_str), Some("q"));
    }

    /// Catches silently accepting a typo, a missing column or garbage.
    #[test]
    fn bad_input_is_refused_with_a_clear_message() {
        let head = "qe,time_meas_ms,u_ticks,s_ticks,blkio_ticks,iowait_ticks";
        let e = read_qe_csv(
            &write(
                "typo.csv",
                &format!("{head},daemon_u_tick\n1,1,1,1,1,1,1\n"),
            ),
            &Setup::default(),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("unknown column `daemon_u_tick`"),
            "{e}"
        );
        let e = read_qe_csv(
            &write(
                "miss.csv",
                "qe,time_meas_ms,u_ticks,s_ticks,blkio_ticks\n1,1,1,1,1\n",
            ),
            &Setup::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("`iowait_ticks` is missing"), "{e}");
        let e = read_qe_csv(
            &write("neg.csv", &format!("{head}\n1,1,-3,1,1,1\n")),
            &Setup::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("line 2: `u_ticks` = \"-3\""), "{e}");
        let e = read_qe_csv(
            &write("empty.csv", &format!("{head}\n1,1,,1,1,1\n")),
            &Setup::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("required `u_ticks` is empty"), "{e}");
        let e = read_qe_csv(
            &write("dup.csv", &format!("{head}\n1,1,1,1,1,1\n1,1,1,1,1,1\n")),
            &Setup::default(),
        )
        .unwrap_err();
        assert!(matches!(e, ImportError::DuplicateQe { qe: 1, .. }), "{e}");
        let e =
            read_qe_csv(&write("none.csv", &format!("{head}\n")), &Setup::default()).unwrap_err();
        assert!(matches!(e, ImportError::NoRows { .. }));
    }

    #[test]
    fn wrong_schema_is_refused() {
        let path = write("other.json", r#"{"schema":"ttp.emp/1","qes":[]}"#);
        let e = read_run_json(&path).unwrap_err();
        assert!(e.to_string().contains("ttp-ebpf run --json"), "{e}");
    }
}
