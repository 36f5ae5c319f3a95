//! SVG: the charts of each kind of result, drawn in `report/<protocol>/`
//! (plotters links only into `ttp-user`).
use ttp_load::output::LoadReport;
use ttp_statements::document::StatementsReport;
use ttp_sys::sys::export::{ExportError, Exporter};
use ttp_ttpv2::analysis::Analysis;
use ttp_vprofile::document::VprofileReport;

/// A chart of one result.
pub(crate) enum Svg<'a> {
    /// TTPv2: each Q@C's QEs, Time_meas and Time_calc (`run --svg`,
    /// `analyze --svg`).
    Ttpv2(&'a Analysis),
    /// vprofile: the variance tree as an icicle.
    Vprofile(&'a VprofileReport),
    /// statements: the top groups' time, stacked by part.
    Statements(&'a StatementsReport, usize),
    /// load: the percentile spectrum of every distribution.
    Load(&'a LoadReport),
}

impl Exporter for Svg<'_> {
    fn serialize(&self) -> Result<Vec<u8>, ExportError> {
        let text = match self {
            Svg::Ttpv2(a) => crate::report::ttpv2::svg::render_svg(a)
                .map_err(|e| ExportError(format!("drawing the chart: {e}")))?,
            Svg::Vprofile(r) => {
                crate::report::vprofile::icicle(r).map_err(|e| ExportError(e.to_string()))?
            }
            Svg::Statements(r, top) => {
                crate::report::statements::svg::stacked(r, *top).map_err(ExportError)?
            }
            Svg::Load(r) => {
                crate::report::load::svg::render(r).map_err(|e| ExportError(e.to_string()))?
            }
        };
        Ok(text.into_bytes())
    }
}
