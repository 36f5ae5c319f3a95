//! HdrHistogram's percentile text (`.hgrm`): `load --hgrm PATH` writes the
//! run's headline distribution to PATH and every distribution beside it
//! (`ttp_load::output::LoadReport::hgrm_files` names them).
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use ttp_load::output::LoadReport;
use ttp_sys::sys::export::{ExportError, Exporter};

/// One distribution as a `.hgrm` file.
pub(crate) struct Hgrm<'a>(pub &'a Histogram<u64>);

impl Exporter for Hgrm<'_> {
    fn serialize(&self) -> Result<Vec<u8>, ExportError> {
        Ok(hgrm_text(self.0).into_bytes())
    }
}

/// Writes the `.hgrm` files of `report` for `path` (atomically, without a
/// `wrote` line, as `load` always has); returns their paths.
pub(crate) fn write_all(
    report: &LoadReport,
    path: &Path,
) -> Result<Vec<PathBuf>, super::OutputError> {
    let mut written = Vec::new();
    for (p, h) in report.hgrm_files(path) {
        super::write_unannounced_file(&p, &Hgrm(h))?;
        written.push(p);
    }
    Ok(written)
}

/// HdrHistogram's percentile-distribution text (the `.hgrm` files its
/// plotter and wrk2 produce): values in milliseconds, 5 ticks per half
/// distance, columns Value, Percentile, TotalCount, 1/(1-Percentile), and the
/// Mean/StdDeviation/Max/Total count/Buckets footer.
fn hgrm_text(h: &Histogram<u64>) -> String {
    const NS_PER_MS: f64 = 1e6;
    let mut out = String::new();
    out.push_str(&format!(
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    ));
    let digits = usize::from(h.sigfig());
    let mut total = 0u64;
    if !h.is_empty() {
        for v in h.iter_quantiles(5) {
            total += v.count_since_last_iteration();
            let value_ms = v.value_iterated_to() as f64 / NS_PER_MS;
            let q = v.quantile_iterated_to();
            if q < 1.0 {
                out.push_str(&format!(
                    "{value_ms:>12.digits$} {q:>2.12} {total:>10} {:>14.2}\n",
                    1.0 / (1.0 - q)
                ));
            } else {
                out.push_str(&format!("{value_ms:>12.digits$} {q:>2.12} {total:>10}\n"));
            }
        }
    }
    let (mean, sd, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (
            h.mean() / NS_PER_MS,
            h.stdev() / NS_PER_MS,
            h.max() as f64 / NS_PER_MS,
        )
    };
    out.push_str(&format!(
        "#[Mean    = {mean:>12.digits$}, StdDeviation   = {sd:>12.digits$}]\n"
    ));
    out.push_str(&format!(
        "#[Max     = {max:>12.digits$}, Total count    = {:>12}]\n",
        h.len()
    ));
    out.push_str(&format!(
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]\n",
        h.buckets(),
        sub_bucket_count(h.sigfig())
    ));
    out
}

/// HdrHistogram's sub-bucket count: the smallest power of two at or above
/// 2·10^sigfig (2048 for 3 significant digits).
fn sub_bucket_count(sigfig: u8) -> u64 {
    (2 * 10u64.pow(u32::from(sigfig))).next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a `.hgrm` writer whose rows do not parse as the four numeric
    /// columns plotters expect, whose TotalCount does not reach the count, or
    /// whose footer is missing: 1..=1000 µs recorded once each.
    #[test]
    fn hgrm_rows_and_footer() {
        let mut h = ttp_load::histograms::new_histogram();
        for us in 1..=1000u64 {
            h.record(us * 1000).unwrap();
        }
        let text = hgrm_text(&h);
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(
            header,
            ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
        );
        assert_eq!(lines.next(), Some(""));
        let rows: Vec<Vec<f64>> = text
            .lines()
            .skip(2)
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().map(|c| c.parse().unwrap()).collect())
            .collect();
        // First row: the smallest value (1 µs = 0.001 ms) at percentile 0.
        assert_eq!(rows[0][..3], [0.001, 0.0, 1.0]);
        assert!((rows[0][3] - 1.0).abs() < 1e-9);
        // The 50 % row holds value 0.5 ms with 500 values at or below it.
        let median = rows.iter().find(|r| r[1] == 0.5).unwrap();
        assert_eq!(median[2], 500.0);
        assert!((median[0] - 0.5).abs() < 0.001, "{median:?}");
        assert!((median[3] - 2.0).abs() < 1e-9);
        // The last row is percentile 1 with the total count and three columns.
        let last = rows.last().unwrap();
        assert_eq!(last.len(), 3);
        assert_eq!(last[1], 1.0);
        assert_eq!(last[2], 1000.0);
        // Footer: mean 0.5005 ms and standard deviation √((n²−1)/12) µs =
        // 0.2887 ms of 1..=1000 µs, to the histogram's 0.1 % precision.
        let footer = |key: &str| -> f64 {
            let line = text.lines().find(|l| l.contains(key)).unwrap();
            let after = &line[line.find(key).unwrap() + key.len()..];
            let after = after.trim_start_matches([' ', '=']);
            after
                .split([',', ']'])
                .next()
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        };
        assert!((footer("Mean") - 0.5005).abs() < 0.001, "{text}");
        assert!((footer("StdDeviation") - 0.2887).abs() < 0.001, "{text}");
        assert!((footer("Max") - 1.0).abs() < 0.001, "{text}");
        assert_eq!(footer("Total count"), 1000.0);
        assert_eq!(footer("SubBuckets"), 2048.0);
    }
}
