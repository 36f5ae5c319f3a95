//! `ttp-ebpf analyze --lab URL --experiment NAME [--by-host]`: TTPv2
//! applied to an experiment of the lab exactly as `analyze STUDY` applies
//! it to study files. The lab's done Q@Cs become one in-memory study per
//! host label (lab/study.rs, the studies `lab export` writes), and those
//! go through `analyze`'s own code: the same as `analyze` of the exported
//! files, all host labels together, or one analysis per host label, each
//! with its machine's paragraph (TTPv2 Sec. 9), with --by-host.
use std::path::Path;

use crate::lab::{Lab, schema, study::read_experiment};
use ttp_sys::error::usage;

use super::analyze_inputs::{Inputs, write_outputs};

/// The lab entry of `analyze`.
#[derive(Debug, clap::Args)]
pub(crate) struct LabArgs {
    /// Analyse an experiment of the lab database (key=value pairs or a
    /// postgresql:// URL; see `ttp-ebpf lab`) instead of files.
    #[arg(long, value_name = "URL", requires = "experiment")]
    pub lab: Option<String>,
    /// The lab's experiment to analyse (with --lab).
    #[arg(long, value_name = "NAME", requires = "lab")]
    pub experiment: Option<String>,
    /// One analysis per host label, each with the machine facts of its
    /// hosts, instead of one over all host labels (with --lab).
    #[arg(long, requires = "lab")]
    pub by_host: bool,
}

pub fn run(
    url: &str,
    args: &LabArgs,
    correlations: bool,
    svg: Option<&Path>,
    json: Option<&Path>,
) -> anyhow::Result<()> {
    let name = args.experiment.as_deref().unwrap_or_default();
    if args.by_host && (svg.is_some() || json.is_some()) {
        return usage(
            "--by-host prints one analysis per host label; for --json or --svg per host label, `lab export` the studies and analyse each file",
        );
    }
    let mut lab = Lab::connect(url)?;
    schema::require_current(&mut lab)?;
    let studies = read_experiment(&mut lab, name)?;
    if studies.is_empty() {
        return usage(format!(
            "experiment {name:?} has no finished Q@C yet; `ttp-ebpf lab status --lab URL --experiment {name}` shows its tasks"
        ));
    }
    let source = |label: &str| format!("lab experiment {name} on {label}");
    if !args.by_host {
        let mut inputs = Inputs::default();
        for s in &studies {
            let (qcs, machine) = s.for_analysis(&source(&s.host_label));
            inputs.add(qcs, machine);
        }
        let shown = inputs.analyse(correlations);
        crate::report::render::print(&shown);
        return write_outputs(&shown, svg, json);
    }
    for (i, s) in studies.iter().enumerate() {
        if i > 0 {
            println!();
        }
        println!(
            "== experiment {name}, host label {} ({} Q@Cs) ==",
            s.host_label,
            s.qcs.len()
        );
        let mut inputs = Inputs::default();
        let (qcs, machine) = s.for_analysis(&source(&s.host_label));
        inputs.add(qcs, machine);
        crate::report::render::print(&inputs.analyse(correlations));
    }
    Ok(())
}
