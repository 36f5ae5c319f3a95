//! The report of a `run` of several Q@Cs (several commands, a parameter
//! scan, or both): TTPv2's Steps 1–5 over all of them at once, as
//! `analyze` applies them to an experiment, so the checks across Q@Cs
//! (QC3/QC4, POST2/POST3 over the scanned parameter) are evaluated; then,
//! with several commands, each compared with the first (ttp-compare).

use super::run_args::RunArgs;
use crate::{commands::Plan, report::format};
use ttp_compare::{CompareDocument, Config};
use ttp_ledger::collect::machine::MachineFacts;
use ttp_ttpv2::{
    analysis::{ANALYZE_SCHEMA, AnalyzeDocument, analyse},
    model::QcInput,
};

/// The run as one `ttp.analyze/1` document: its Q@Cs labelled by command
/// name and parameter value, which `report` renders and `compare` reads
/// (one file: its commands compared; two files: Q@Cs matched by labels).
pub(crate) fn document(qcs: &[QcInput], machine: &MachineFacts) -> AnalyzeDocument {
    let a = analyse(qcs, Some(machine), crate::report::ttpv2::paragraph::text);
    AnalyzeDocument {
        schema: ANALYZE_SCHEMA.into(),
        machine: Some(machine.clone()),
        qcs: a.qcs,
        checks: a.checks,
        paragraph: a.paragraph,
        correlations: None,
    }
}

/// The comparison of the commands of `doc` (the first is the baseline),
/// with compare's default settings; `Err` says why there is none.
pub(crate) fn comparison(doc: &AnalyzeDocument) -> Result<CompareDocument, String> {
    let sides = ttp_compare::sides_by_name(&doc.schema, doc.machine.as_ref(), &doc.qcs)
        .map_err(|e| e.to_string())?;
    ttp_compare::compare(&sides, &Config::default()).map_err(|e| e.to_string())
}

pub(super) fn finish(
    args: &RunArgs,
    plan: &Plan,
    qcs: &[QcInput],
    machine: &MachineFacts,
) -> anyhow::Result<()> {
    let doc = document(qcs, machine);
    if let Some(path) = &args.json {
        format::write(path, &format::json::Json(&doc))?;
    }
    let analysis = ttp_ttpv2::analysis::Analysis {
        qcs: doc.qcs.clone(),
        checks: doc.checks.clone(),
        paragraph: doc.paragraph.clone(),
    };
    // `report` shows a saved run of several commands the same way: the
    // analysis, the comparison, then `--blame`'s section per Q@C
    // (report/render/ttpv2.rs).
    let shown = crate::report::render::load(serde_json::to_value(&doc)?)?;
    crate::report::render::print(shown.as_ref());
    if plan.several_commands
        && let Err(why) = comparison(&doc)
    {
        println!("The commands are not compared: {why}");
    }
    if let Some(path) = &args.svg {
        format::write(path, &format::svg::Svg::Ttpv2(&analysis))?;
    }
    if let Some(path) = &args.export_markdown {
        format::write(path, &format::text::Markdown(shown.as_ref()))?;
    }
    if let (Some(_), Some(path)) = (&plan.parameter, &args.json) {
        println!(
            "Time against the parameter: ttp-ebpf report {} --plot DIR",
            path.display()
        );
    }
    Ok(())
}
