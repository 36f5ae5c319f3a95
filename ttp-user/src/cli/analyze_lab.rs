//! `ttp-ebpf analyze --lab URL --experiment NAME [--by-host]`: TTPv2
//! applied to an experiment of the lab exactly as `analyze STUDY` applies
//! it to study files. The lab's done Q@Cs become one in-memory study per
//! host label (lab/study.rs, the studies `lab export` writes), and those
//! go through `analyze`'s own code: the same as `analyze` of the exported
//! files, all host labels together, or one analysis per host label, each
//! with its machine's paragraph (TTPv2 Sec. 9), with --by-host.
use crate::lab::{Lab, schema, study::read_experiment};
use ttp_sys::error::usage;

use super::analyze::{Args, Inputs, write_outputs};

/// The lab entry of `analyze`.
#[derive(Debug, clap::Args)]
pub struct LabArgs {
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

pub fn run(url: &str, args: &Args) -> anyhow::Result<()> {
    let name = args.lab.experiment.as_deref().unwrap_or_default();
    if args.lab.by_host && (args.svg.is_some() || args.json.is_some()) {
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
    if !args.lab.by_host {
        let mut inputs = Inputs::default();
        for s in &studies {
            let (qcs, machine) = s.for_analysis(&source(&s.host_label));
            inputs.add(qcs, machine);
        }
        let shown = inputs.analyse(args.correlations);
        crate::report::render::print(&shown);
        return write_outputs(&shown, args.svg.as_deref(), args.json.as_deref());
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
        crate::report::render::print(&inputs.analyse(args.correlations));
    }
    Ok(())
}
