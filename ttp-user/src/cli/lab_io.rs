//! `ttp-ebpf lab export` and `lab import`: an experiment of the lab as
//! `ttp.study/1` files, one per host label, so everything stays analysable
//! offline (`analyze FILE…`), and an existing study brought into the lab
//! (docs/lab.md, "Analysis, export and import").
use std::path::PathBuf;

use crate::lab::{
    Lab,
    import::{Imported, import},
    schema,
    study::{HOST_LABEL, read_experiment},
};
use ttp_sys::error::usage;
use ttp_ttpv2::study::read_lines;

/// Write an experiment of the lab as study files (`ttp.study/1`), one per
/// host label: DIR/EXPERIMENT.HOST_LABEL.study, each written atomically.
/// `ttp-ebpf analyze` of these files gives what `analyze --lab` gives.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[arg(long, value_name = "URL")]
    pub lab: String,
    #[arg(long, value_name = "NAME")]
    pub experiment: String,
    /// The directory to write the studies into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Print what was written as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Bring a study file (`ttp.study/1`, from `experiment` or `lab export`)
/// into the lab as a done experiment. Importing the same study again
/// changes nothing; one whose Q@Cs or spec differ from the lab's is
/// refused.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The study file.
    pub study: PathBuf,
    #[arg(long, value_name = "URL")]
    pub lab: String,
    /// The host label its Q@Cs were measured on (default: the study's own
    /// `host_label` label, which `lab export` writes).
    #[arg(long, value_name = "LABEL")]
    pub host_label: Option<String>,
    /// The experiment's name in the lab (default: the name in the study's
    /// spec).
    #[arg(long, value_name = "NAME")]
    pub experiment: Option<String>,
    #[arg(long)]
    pub json: bool,
}

/// A host label as a file name part: path separators and dots replaced.
fn file_part(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub(crate) fn export(a: ExportArgs) -> anyhow::Result<()> {
    let mut lab = Lab::connect(&a.lab)?;
    schema::require_current(&mut lab)?;
    let studies = read_experiment(&mut lab, &a.experiment)?;
    if studies.is_empty() {
        return usage(format!(
            "experiment {:?} has no finished Q@C yet: nothing to export",
            a.experiment
        ));
    }
    let mut names = std::collections::BTreeSet::new();
    let mut planned = Vec::new();
    for s in &studies {
        let name = format!(
            "{}.{}.study",
            file_part(&a.experiment),
            file_part(&s.host_label)
        );
        if !names.insert(name.clone()) {
            return usage(format!(
                "host labels of {:?} map to the same file name {name}; nothing written",
                a.experiment
            ));
        }
        planned.push((a.out.join(name), s));
    }
    ttp_sys::sys::atomic::create_dir_all(&a.out).map_err(|e| {
        ttp_sys::error::UsageError::new(format!("cannot create {}: {e}", a.out.display()))
    })?;
    let mut written = Vec::new();
    for (path, s) in planned {
        crate::report::format::write_unannounced_file(
            &path,
            &crate::report::format::json::JsonLines {
                header: &s.header,
                rows: &s.qcs,
            },
        )?;
        written.push(serde_json::json!({
            "host_label": s.host_label,
            "qcs": s.qcs.len(),
            "file": path.display().to_string(),
        }));
        if !a.json {
            println!(
                "{}: {} Q@Cs of host label {}",
                path.display(),
                s.qcs.len(),
                s.host_label
            );
        }
    }
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "schema": "ttp.lab-export/1",
                "lab": lab.target,
                "experiment": a.experiment,
                "studies": written,
            })
        );
    }
    Ok(())
}

pub(crate) fn import_study(a: ImportArgs) -> anyhow::Result<()> {
    let (header, qcs) =
        read_lines(&a.study).map_err(|e| ttp_sys::error::UsageError::new(e.to_string()))?;
    let source = a.study.display().to_string();
    let name = match (
        &a.experiment,
        header.spec.get("name").and_then(|n| n.as_str()),
    ) {
        (Some(n), _) => n.clone(),
        (None, Some(n)) => n.to_string(),
        (None, None) => {
            return usage(format!(
                "{source}: its spec has no name; give --experiment NAME"
            ));
        }
    };
    let label = match &a.host_label {
        Some(l) => l.clone(),
        None => {
            let labels: std::collections::BTreeSet<Option<&String>> =
                qcs.iter().map(|q| q.qc.labels.get(HOST_LABEL)).collect();
            match labels.into_iter().collect::<Vec<_>>().as_slice() {
                [Some(l)] => (*l).clone(),
                _ => {
                    return usage(format!(
                        "{source}: its Q@Cs do not name one host label; give --host-label LABEL"
                    ));
                }
            }
        }
    };
    if label.trim().is_empty() {
        return usage("--host-label is empty: give the kind of machine the study was measured on");
    }
    let mut lab = Lab::connect(&a.lab)?;
    schema::require_current(&mut lab)?;
    let done = import(&mut lab, &header, &qcs, &name, &label, &source)?;
    let (qcs_new, created) = match done {
        Imported::New { qcs, created } => (qcs, created),
        Imported::Unchanged => (0, false),
    };
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "schema": "ttp.lab-import/1",
                "lab": lab.target,
                "experiment": name,
                "host_label": label,
                "study": source,
                "qcs_imported": qcs_new,
                "experiment_created": created,
                "unchanged": done == Imported::Unchanged,
            })
        );
    } else if done == Imported::Unchanged {
        println!(
            "{source} is already in the lab as experiment {name:?} on host label {label} ({} Q@Cs): nothing changed",
            qcs.len()
        );
    } else {
        println!(
            "{source}: {qcs_new} Q@Cs imported as experiment {name:?}{} on host label {label}",
            if created { " (new)" } else { "" }
        );
    }
    Ok(())
}
