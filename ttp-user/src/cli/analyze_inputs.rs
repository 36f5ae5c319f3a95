//! What `analyze` does with the Q@Cs it read, whatever their source
//! (files, the lab, `experiment`): TTPv2 Steps 1–5, the terminal report,
//! and the files `--svg` and `--json` ask for.
use std::path::Path;

use crate::report::format::{Outputs, json::Json, svg::Svg};
use crate::report::render::Analyze;
use ttp_ledger::collect::machine::MachineFacts;
use ttp_ttpv2::analysis::{ANALYZE_SCHEMA, Analysis, AnalyzeDocument, analyse};
use ttp_ttpv2::model::QcInput;
use ttp_ttpv2::{analysis::retained_correlations, correlations::CorrelationRow};

/// The Q@Cs of the files given, and the machine they were measured on.
#[derive(Default)]
pub(super) struct Inputs {
    pub qcs: Vec<QcInput>,
    machine: Option<MachineFacts>,
    caches: Vec<Option<bool>>,
}

impl Inputs {
    /// One file's Q@Cs and machine (a run JSON or a study): the first
    /// file's machine speaks for all, but for the cache ([`merge_cache`]).
    pub(crate) fn add(&mut self, mut qcs: Vec<QcInput>, machine: Option<MachineFacts>) {
        self.caches
            .push(machine.as_ref().and_then(|m| m.cold_cache));
        if self.machine.is_none() {
            self.machine = machine;
        }
        self.qcs.append(&mut qcs);
    }

    /// TTPv2 Steps 1–5 over every Q@C, as `analyze` shows it.
    pub(crate) fn analyse(mut self, correlations: bool) -> Analyze {
        if let Some(m) = self.machine.as_mut() {
            merge_cache(m, &self.caches);
        }
        let analysis = analyse(
            &self.qcs,
            self.machine.as_ref(),
            crate::report::ttpv2::paragraph::text,
        );
        let correlations = correlations.then(|| retained_correlations(&self.qcs, &analysis));
        document(self.machine, analysis, correlations)
    }
}

/// Prints the analysis (as `report` shows the saved document) and writes
/// what `--svg` and `--json` ask for: the chart of every Q@C and the
/// document (schema ttp.analyze/1). Shared with `experiment`.
pub(super) fn show(
    svg: Option<&Path>,
    json: Option<&Path>,
    machine: Option<MachineFacts>,
    analysis: Analysis,
    correlations: Option<Vec<CorrelationRow>>,
) -> anyhow::Result<()> {
    let shown = document(machine, analysis, correlations);
    crate::report::render::print(&shown);
    write_outputs(&shown, svg, json)
}

fn document(
    machine: Option<MachineFacts>,
    analysis: Analysis,
    correlations: Option<Vec<CorrelationRow>>,
) -> Analyze {
    Analyze(AnalyzeDocument {
        schema: ANALYZE_SCHEMA.into(),
        machine,
        qcs: analysis.qcs,
        checks: analysis.checks,
        paragraph: analysis.paragraph,
        correlations,
    })
}

/// Writes the chart of every Q@C (`--svg`) and the document (`--json`,
/// schema ttp.analyze/1), each atomically.
pub(super) fn write_outputs(
    shown: &Analyze,
    svg: Option<&Path>,
    json: Option<&Path>,
) -> anyhow::Result<()> {
    let analysis = shown.analysis();
    Outputs::default()
        .add_unannounced(svg, Svg::Ttpv2(&analysis))
        .add_unannounced(json, Json(&shown.0))
        .write()?;
    Ok(())
}

/// The machine facts of the first file speak for every file, except the
/// cache: files measured warm and cold together are neither "with a warm
/// cache" nor "with a cold cache" (Sec. 9 (6)); the paragraph says how many
/// of each instead.
fn merge_cache(m: &mut MachineFacts, caches: &[Option<bool>]) {
    let cold = caches.iter().filter(|c| **c == Some(true)).count();
    let warm = caches.iter().filter(|c| **c == Some(false)).count();
    if cold > 0 && warm > 0 {
        m.cold_cache = None;
        m.deviations.push(format!(
            "the files analysed mix cache states: {cold} measured with a cold cache, {warm} with a warm cache"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A warm and a cold run analysed together: the cache is not stated as
    /// warm, and the mix is named; files of one state keep it. Catches
    /// "with a warm cache (2 Q@Cs)" for a warm and a cold run.
    #[test]
    fn a_warm_and_a_cold_file_are_not_called_warm() {
        let mut m = ttp_ledger::collect::machine::MachineFacts {
            cold_cache: Some(false),
            ..Default::default()
        };
        merge_cache(&mut m, &[Some(false), Some(true)]);
        assert_eq!(m.cold_cache, None);
        assert_eq!(
            m.deviations,
            [
                "the files analysed mix cache states: 1 measured with a cold cache, 1 with a warm cache"
            ]
        );
        let mut same = ttp_ledger::collect::machine::MachineFacts {
            cold_cache: Some(true),
            ..Default::default()
        };
        merge_cache(&mut same, &[Some(true), Some(true), None]);
        assert_eq!(same.cold_cache, Some(true));
        assert!(same.deviations.is_empty());
    }
}
