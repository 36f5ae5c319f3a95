//! `ttp-ebpf compare` shown: the terminal report, Markdown, and per-measure
//! strip plots (svg.rs) of a `ttp.compare/1` document.
pub(crate) mod svg;
mod vprofile;

use crate::report::render::table::Table;
use ttp_compare::{CompareDocument, Comparison, MeasureComparison, stats::MwuMethod};

/// What the compared results are, in words.
fn kind_name(schema: &str) -> &'static str {
    match schema {
        "ttp.run/1" => "TTPv2 runs",
        "ttp.emp/1" => "EMP runs",
        "ttp.load/1" => "load, per second",
        "ttp.vprofile/1" => "vprofile, summaries",
        _ => "results",
    }
}

fn num(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// A p-value in a table cell: four decimals, or scientific below 0.0001.
fn p_cell(p: f64) -> String {
    if p < 1e-4 {
        format!("{p:.1e}")
    } else {
        format!("{p:.4}")
    }
}

fn ci_text(m: &MeasureComparison) -> String {
    m.ci.as_ref()
        .map_or("-".into(), |c| format!("{:.3}–{:.3}", c.lower, c.upper))
}

fn mwu_text(m: &MeasureComparison) -> String {
    let tag = match m.mann_whitney.method {
        MwuMethod::Exact => " (exact)",
        MwuMethod::Asymptotic => "",
    };
    format!("{}{tag}", p_cell(m.mann_whitney.p))
}

/// The loud note of a comparison whose set-ups differ; empty when they
/// agree.
pub(crate) fn setup_note(c: &Comparison) -> String {
    if c.setup_differences.is_empty() {
        return String::new();
    }
    let facts = c
        .setup_differences
        .iter()
        .map(|d| {
            format!(
                "{}: {} in {}, {} in {}",
                d.fact,
                d.baseline.as_deref().unwrap_or("not recorded"),
                c.baseline,
                d.candidate.as_deref().unwrap_or("not recorded"),
                c.candidate
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    format!(
        "!! WARNING: the set-up of {} differs from {}'s ({facts}).\n!! Any difference below may come from the set-up, not from what was changed.\n",
        c.candidate, c.baseline
    )
}

/// The measures of one comparison as a table (Markdown and text share it).
pub(crate) fn table(c: &Comparison) -> Table {
    let (a, x) = (&c.baseline, &c.candidate);
    let columns = [
        "measure".to_string(),
        "centre".into(),
        format!("n_{a}"),
        format!("n_{x}"),
        a.clone(),
        x.clone(),
        format!("{x}/{a}"),
        format!("CI_of_{x}/{a}"),
        "p_MWU".into(),
        "p_Welch".into(),
        "p_Holm".into(),
        "cliffs_delta".into(),
    ];
    let mut t = Table::new(&columns.iter().map(String::as_str).collect::<Vec<_>>());
    for m in &c.measures {
        t.push(vec![
            m.measure.clone(),
            m.centre.name().into(),
            m.baseline.n.to_string(),
            m.candidate.n.to_string(),
            num(m.baseline.centre),
            num(m.candidate.centre),
            m.ratio.map_or("-".into(), |r| format!("{r:.4}")),
            ci_text(m),
            mwu_text(m),
            m.welch.as_ref().map_or("-".into(), |w| p_cell(w.p)),
            p_cell(m.p_holm),
            format!("{:.2}", m.cliffs_delta),
        ]);
    }
    t
}

/// Numbers held once per file, side by side (no samples, no interval).
fn whole_run_table(c: &Comparison) -> Option<Table> {
    if c.whole_run.is_empty() {
        return None;
    }
    let (a, x) = (&c.baseline, &c.candidate);
    let cols = [
        "whole run".to_string(),
        a.clone(),
        x.clone(),
        format!("{x}/{a}"),
    ];
    let mut t = Table::new(&cols.iter().map(String::as_str).collect::<Vec<_>>());
    for w in &c.whole_run {
        t.push(vec![
            w.name.clone(),
            num(w.baseline),
            num(w.candidate),
            w.ratio.map_or("-".into(), |r| format!("{r:.4}")),
        ]);
    }
    Some(t)
}

const WHOLE_RUN_NOTE: &str = "whole-run numbers: one value per file, so no interval or test (the file keeps no per-second percentiles)";

/// Columns padded to their widest cell.
fn aligned(t: &Table) -> String {
    let widths: Vec<usize> = (0..t.columns.len())
        .map(|i| {
            std::iter::once(&t.columns[i])
                .chain(t.rows.iter().map(|r| &r[i]))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let mut s = String::from(" ");
        for (c, w) in cells.iter().zip(&widths) {
            s.push_str(&format!(" {c:<w$}"));
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&t.columns);
    for r in &t.rows {
        out.push_str(&line(r));
    }
    out
}

fn header(doc: &CompareDocument) -> String {
    let mut out = format!(
        "ttp compare ({}, {}): {} against {}\n",
        kind_name(&doc.kind),
        doc.kind,
        doc.files[1..]
            .iter()
            .map(|f| f.label.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        doc.files[0].label
    );
    let counted = if doc.kind == "ttp.vprofile/1" {
        "invocations"
    } else {
        "retained"
    };
    for f in &doc.files {
        out.push_str(&format!(
            "  {}  {}  {} ({} {counted})\n",
            f.label, f.path, f.title, f.retained
        ));
    }
    out
}

fn method_text(doc: &CompareDocument) -> String {
    let m = &doc.method;
    if doc.kind == "ttp.vprofile/1" {
        return format!(
            "Method:\n  interval: {} % {}\n  tests: {}\n  multiple comparisons: {}, alpha {}\n  a difference of the means is claimed only when the corrected p is below alpha and Fieller's interval excludes 1\n",
            (m.config.level * 100.0).round(),
            m.interval,
            m.tests,
            m.correction,
            m.config.alpha
        );
    }
    format!(
        "Method:\n  interval: {} % {}; seed {}, {}\n  tests: {}\n  multiple comparisons: {}, alpha {}\n  effect size: Cliff's delta, P(B > A) − P(B < A)\n  a difference is claimed only when the corrected p is below alpha and the interval excludes 1\n  runs needed: {}; for {} % at power {}\n",
        (m.config.level * 100.0).round(),
        m.interval,
        m.config.seed,
        m.rng,
        m.tests,
        m.correction,
        m.config.alpha,
        m.runs_needed,
        m.config.detect_rel * 100.0,
        m.config.power
    )
}

/// What each measure is, once (from the first comparison holding it).
fn legend(doc: &CompareDocument) -> String {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = String::new();
    for m in doc.comparisons.iter().flat_map(|c| &c.measures) {
        let name = m.measure.rsplit(": ").next().unwrap_or(&m.measure);
        if !seen.contains(&name) {
            seen.push(name);
            out.push_str(&format!(
                "  {name}: {}; one sample per {}\n",
                m.what,
                m.sample_unit.trim_end_matches('s')
            ));
        }
    }
    out
}

/// The terminal report.
pub fn text(doc: &CompareDocument) -> String {
    let mut out = header(doc);
    if doc.kind == "ttp.vprofile/1" {
        out.push_str("Measured: each file's root function over the invocations of its last round; the files hold its mean, sample variance and the factors' shares, not the invocations\n");
    } else {
        out.push_str("Measures:\n");
        out.push_str(&legend(doc));
    }
    for c in &doc.comparisons {
        out.push('\n');
        out.push_str(&setup_note(c));
        out.push_str(&format!("{} against {}:\n", c.candidate, c.baseline));
        if !c.measures.is_empty() {
            out.push_str(&aligned(&table(c)));
        }
        if let Some(v) = &c.vprofile {
            out.push_str(&aligned(&vprofile::root_table(c, v)));
            for l in vprofile::lines(c, v, doc.method.config.level) {
                out.push_str(&format!("  {l}\n"));
            }
            out.push_str(&format!("  {}:\n", vprofile::FACTORS_NOTE));
            out.push_str(&aligned(&vprofile::factor_table(c, v)));
        }
        for m in &c.measures {
            out.push_str(&format!("  {}: {}\n", m.measure, m.verdict.text));
        }
        for s in &c.skipped {
            out.push_str(&format!("  not compared: {s}\n"));
        }
        if let Some(t) = whole_run_table(c) {
            out.push_str(&format!("  {WHOLE_RUN_NOTE}:\n"));
            out.push_str(&aligned(&t));
        }
    }
    out.push('\n');
    out.push_str(&method_text(doc));
    out
}

/// Markdown: the files, then per candidate its note, table and verdicts.
pub(crate) fn markdown(doc: &CompareDocument) -> String {
    let mut files = Table::new(&["label", "file", "measured", "retained"]);
    for f in &doc.files {
        files.push(vec![
            f.label.clone(),
            f.path.clone(),
            f.title.clone(),
            f.retained.to_string(),
        ]);
    }
    let mut out = format!(
        "**ttp compare ({}, {})**\n\n{}",
        kind_name(&doc.kind),
        doc.kind,
        files.markdown()
    );
    for c in &doc.comparisons {
        out.push_str(&format!("\n**{} against {}**\n\n", c.candidate, c.baseline));
        let note = setup_note(c);
        if !note.is_empty() {
            out.push_str(&format!(
                "> {}\n",
                note.replace("!! ", "").replace('\n', " ")
            ));
        }
        if !c.measures.is_empty() {
            out.push_str(&table(c).markdown());
            out.push('\n');
        }
        if let Some(v) = &c.vprofile {
            out.push_str(&vprofile::root_table(c, v).markdown());
            out.push('\n');
            for l in vprofile::lines(c, v, doc.method.config.level) {
                out.push_str(&format!("- {l}\n"));
            }
            out.push_str(&format!(
                "\n{}:\n\n{}",
                vprofile::FACTORS_NOTE,
                vprofile::factor_table(c, v).markdown()
            ));
        }
        for m in &c.measures {
            out.push_str(&format!("- {}: {}\n", m.measure, m.verdict.text));
        }
        for s in &c.skipped {
            out.push_str(&format!("- not compared: {s}\n"));
        }
        if let Some(t) = whole_run_table(c) {
            out.push_str(&format!(
                "\n{}, {WHOLE_RUN_NOTE}:\n\n{}",
                c.candidate,
                t.markdown()
            ));
        }
    }
    out.push('\n');
    out.push_str(&method_text(doc));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_compare::{Config, Measure, Side, compare, stats::Centre};

    fn side(xs: &[f64], kernel: &str) -> Side {
        Side {
            schema: "ttp.run/1".into(),
            title: "`q`".into(),
            retained: xs.len(),
            measures: vec![Measure {
                name: "time_calc_ms".into(),
                what: String::new(),
                centre: Centre::Median,
                samples: xs.to_vec(),
                sample_unit: "QEs",
            }],
            whole_run: Vec::new(),
            setup: [("kernel", kernel.to_string())].into_iter().collect(),
            vprofile: None,
        }
    }

    /// Catches a set-up difference that is not shouted, a verdict or a
    /// method line missing from either format.
    #[test]
    fn reports_carry_the_warning_the_verdict_and_the_method() {
        let a = side(&[100.0, 101.0, 99.0, 100.5, 99.5, 100.2], "6.18");
        let b = side(&[90.0, 91.0, 89.0, 90.5, 89.5, 90.2], "6.1");
        let doc = compare(
            &[("a.json".into(), a), ("b.json".into(), b)],
            &Config::default(),
        )
        .unwrap();
        let t = text(&doc);
        assert!(
            t.contains(
                "!! WARNING: the set-up of B differs from A's (kernel: 6.18 in A, 6.1 in B)"
            ),
            "{t}"
        );
        assert!(
            t.contains("time_calc_ms: B is 10.0 % faster (95 % CI "),
            "{t}"
        );
        assert!(t.contains("seed 1953788003"), "{t}");
        // Samples 10 % apart without overlap: Welch's p is far below 1e-4
        // and must be written so, not rounded to 0.
        let welch = doc.comparisons[0].measures[0].welch.as_ref().unwrap().p;
        assert!(welch < 1e-4);
        assert!(t.contains(&format!("{welch:.1e}")), "{t}");
        let md = markdown(&doc);
        assert!(md.contains("> WARNING: the set-up of B differs"), "{md}");
        assert!(md.contains("| time_calc_ms | median | 6 | 6 |"), "{md}");
        assert!(md.contains("- time_calc_ms: B is 10.0 % faster"), "{md}");
    }
}
