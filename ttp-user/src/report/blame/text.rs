//! The terminal report, and the compact one kept per QE of `run --blame`.
use std::fmt::Write;

use ttp_blame::{fmt_ns, report::BlameReport};
use ttp_window::window::blame_record::{BlameSummary, CauseKind, CulpritSummary, ResourceSummary};

/// The report for people; `top` limits the explanations and culprits.
pub(crate) fn blame_text(report: &BlameReport, top: usize) -> String {
    let mut s = String::new();
    let v = &report.victim;
    let _ = writeln!(
        s,
        "Contention blame for {} (pid {}{}, {} thread{}) over {}, {} window{} of {}",
        if v.comm.is_empty() {
            "the victim"
        } else {
            &v.comm
        },
        v.pid,
        if v.children { " and its children" } else { "" },
        v.threads,
        plural(v.threads),
        fmt_ns(report.span_ns as f64),
        report.windows,
        plural(report.windows),
        fmt_ns(report.window_ns as f64),
    );
    if let Some(e) = v.exited_after_ns {
        let _ = writeln!(s, "The victim exited {} after the start.", fmt_ns(e as f64));
    }
    s.push('\n');
    resources_table(report, &mut s);
    disk_split_lines(report, &mut s, top);
    explanations_list(report, &mut s, top);
    culprit_table(report, &mut s, top);
    checks_list(report, &mut s);
    s
}

/// ttp's disk extension, beside the paper's figures.
fn disk_split_lines(report: &BlameReport, s: &mut String, top: usize) {
    let Some(d) = &report.disk_split else { return };
    if d.blocked_ns == 0 {
        return;
    }
    let _ = writeln!(
        s,
        "Disk wait split (ttp's extension, not iQCAR): {} the disk serving the victim's own requests, {} waiting behind others'",
        fmt_ns(d.own_service_ns as f64),
        fmt_ns(d.behind_others_ns as f64),
    );
    for c in d.culprits.iter().take(top) {
        let pid = c.pid.map_or(String::new(), |p| format!(" (pid {p})"));
        let _ = writeln!(
            s,
            "  behind {}{pid}: {}",
            c.process,
            fmt_ns(c.behind_blame_ns)
        );
    }
    if d.unattributed_ns > 0.0 {
        let _ = writeln!(
            s,
            "  nobody else used the disk: {}",
            fmt_ns(d.unattributed_ns)
        );
    }
    s.push('\n');
}

fn resources_table(report: &BlameReport, s: &mut String) {
    let _ = writeln!(s, "Blocked time by resource and cause (iQCAR eq. 5):");
    let _ = writeln!(
        s,
        "  {:<8} {:>10}  {:>17}  {:>17}  {:>17}  {:>17}  mean slowdown (p1 + p2), eq. 4",
        "resource", "blocked", "concurrent", "own", "known", "unknown",
    );
    for r in &report.resources {
        if !r.blocked_measured {
            let _ = writeln!(s, "  {:<8} not measured", r.resource.name());
            continue;
        }
        let mut line = format!(
            "  {:<8} {:>10}",
            r.resource.name(),
            fmt_ns(r.blocked_ns as f64)
        );
        for k in CauseKind::ALL {
            let ns = r.by_kind.get(&k).copied().unwrap_or(0.0);
            let pct = if r.blocked_ns > 0 {
                100.0 * ns / r.blocked_ns as f64
            } else {
                0.0
            };
            let _ = write!(line, "  {:>10} {:>5.1}%", fmt_ns(ns), pct);
        }
        let _ = write!(line, "  {}", slowdown_text(r));
        let _ = writeln!(s, "{}", line.trim_end());
        if !r.consumption_measured && r.blocked_ns > 0 {
            let _ = writeln!(
                s,
                "  {:<8} (no thread's {} consumption was measured: all of it is unknown)",
                "",
                r.resource.name()
            );
        }
    }
    s.push('\n');
}

fn explanations_list(report: &BlameReport, s: &mut String, top: usize) {
    if report.explanations.is_empty() {
        let _ = writeln!(s, "No blocked time to explain.\n");
        return;
    }
    let _ = writeln!(
        s,
        "Top explanations (iQCAR Sec. 4.2), P = share of all blocked time:"
    );
    for e in report.explanations.iter().take(top) {
        let _ = writeln!(s, "  {:>2}. {}  [P {:.3}]", e.rank, e.text, e.path_weight);
    }
    if report.explanations.len() > top {
        let _ = writeln!(s, "  … {} more in --json", report.explanations.len() - top);
    }
    s.push('\n');
}

fn culprit_table(report: &BlameReport, s: &mut String, top: usize) {
    if report.culprits.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "ttp's blame beside the overlap baseline (Deep-Overlap, iQCAR Sec. 6.1):"
    );
    let _ = writeln!(
        s,
        "  {:<18} {:>7}  {:<22} {:<10} {:>10} {:>6}  {:>18}",
        "process", "pid", "group", "kind", "ttp blame", "DOR", "overlap blame"
    );
    // ttp's top culprits and the baseline's, so that the processes only
    // the overlap method blames show up beside ttp's answer.
    let mut by_overlap: Vec<&CulpritSummary> = report.culprits.iter().collect();
    by_overlap.sort_by(|a, b| b.overlap_blame_ns.total_cmp(&a.overlap_blame_ns));
    let overlap_top: Vec<Option<u32>> = by_overlap
        .iter()
        .take(top)
        .filter(|c| c.overlap_blame_ns > 0.0)
        .map(|c| c.pid)
        .collect();
    let shown: Vec<&CulpritSummary> = report
        .culprits
        .iter()
        .enumerate()
        .filter(|(i, c)| *i < top || overlap_top.contains(&c.pid))
        .map(|(_, c)| c)
        .collect();
    for c in &shown {
        let _ = writeln!(
            s,
            "  {:<18} {:>7}  {:<22} {:<10} {:>10} {:>6.3}  {:>10} {:>5.1}%",
            clip(&c.process, 18),
            c.pid.map_or("-".to_string(), |p| p.to_string()),
            clip(&c.group, 22),
            c.kind.name(),
            fmt_ns(c.blame_ns),
            c.dor,
            fmt_ns(c.overlap_blame_ns),
            100.0 * c.overlap_share
        );
    }
    if report.culprits.len() > shown.len() {
        let _ = writeln!(
            s,
            "  … {} more in --json",
            report.culprits.len() - shown.len()
        );
    }
    s.push('\n');
}

fn checks_list(report: &BlameReport, s: &mut String) {
    let _ = writeln!(s, "Checks:");
    for c in &report.checks {
        if c.passed() {
            let _ = writeln!(s, "  ok    {}", c.name);
        } else {
            let _ = writeln!(
                s,
                "  FAIL  {} ({}): {} violation{}; first: {}",
                c.name,
                c.basis,
                c.violations,
                plural(c.violations),
                c.first.as_deref().unwrap_or("")
            );
        }
    }
}

fn slowdown_text(r: &ResourceSummary) -> String {
    let d = &r.slowdown;
    let mut t = match d.mean() {
        Some(m) => {
            let n = d.rows_defined as f64;
            format!("{m:.2} ({:.2} + {:.2})", d.p1_sum / n, d.p2_sum / n)
        }
        None if d.rows_undefined > 0 => "undefined".to_string(),
        None => "-".to_string(),
    };
    if d.rows_undefined > 0 {
        let _ = write!(
            t,
            "; undefined in {} row{} (victim consumed none)",
            d.rows_undefined,
            plural(d.rows_undefined)
        );
    }
    t
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

/// Lines for the run report: blocked time per resource, then the
/// explanations, each indented under a `QE n` heading.
pub(crate) fn summary_text(b: &BlameSummary, qe: u32, top: usize) -> String {
    let mut s = String::new();
    let per_resource: Vec<String> = b
        .resources
        .iter()
        .filter(|r| r.blocked_measured && r.blocked_ns > 0)
        .map(|r| format!("{} {}", r.resource.name(), fmt_ns(r.blocked_ns as f64)))
        .collect();
    let _ = writeln!(
        s,
        "  QE {qe}: blocked {}{}",
        fmt_ns(b.blocked_ns() as f64),
        if per_resource.is_empty() {
            String::new()
        } else {
            format!(" ({})", per_resource.join(", "))
        }
    );
    for e in b.explanations.iter().take(top) {
        let _ = writeln!(s, "    {}. {}", e.rank, e.text);
    }
    s
}
