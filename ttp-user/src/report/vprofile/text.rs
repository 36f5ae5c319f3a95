//! The text report of `vprofile` (VProfiler, shared paper 004): ranked
//! factors, then the variance tree (eq. 1), nodes below a share of
//! Var(root) folded. Shown live and by `report` of a saved
//! `ttp.vprofile/1` file alike.
use std::fmt::Write as _;

use ttp_vprofile::document::VprofileReport;

/// The text report: header, selected factors, the ranking, the tree
/// (nodes below `min_share` of Var(root) folded into one line per parent).
pub fn vprofile_text(r: &VprofileReport, min_share: f64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "vprofile {} in {} ({}, names from the {}{})",
        r.root,
        r.binary.path,
        r.binary.kind.label(),
        r.binary.symbols.label(),
        r.binary
            .symbol_file
            .as_ref()
            .map(|f| format!(", {f}"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "{} invocations in the last of {} round(s); mean {}, standard deviation {}",
        r.invocations,
        r.rounds.len(),
        ms(r.root_mean_ns),
        ms(r.root_variance_ns2.sqrt()),
    );
    if let Some(lost) = r.measurement.lost_records {
        let _ = writeln!(s, "lost records: {lost}");
    }
    if let Some(o) = r.measurement.probe_overhead_ns_per_hit {
        let _ = writeln!(
            s,
            "probe programs: {o:.0} ns per hit (inside the eBPF programs)"
        );
    }
    let m = &r.measurement;
    match (
        m.probe_cost,
        m.overhead_subtracted_ns_per_invocation,
        m.overhead_uncertainty_ns_per_invocation,
    ) {
        (Some(c), Some(cut), Some(unc)) => {
            // The probes' own time against the root's: what the mean
            // would be without subtracting it.
            if r.root_mean_ns > 0.0 && cut > r.root_mean_ns {
                let _ = writeln!(
                    s,
                    "WARNING: the probes more than double {}'s time ({} a call with them, {} after subtracting their cost, ×{:.1}): \
                     the shares are estimates from a disturbed program; measure fewer functions (--children, fewer --rounds)",
                    r.root,
                    ms(r.root_mean_ns + cut),
                    ms(r.root_mean_ns),
                    (r.root_mean_ns + cut) / r.root_mean_ns
                );
            }
            let _ = writeln!(
                s,
                "probe cost subtracted: {:.0} ns per hit, {:.0} ns for the root's entry and return (± {:.0} ns per hit); {:.1} hit units and {} per invocation, ± {}",
                c.per_hit_ns,
                c.boundary_ns,
                c.uncertainty_per_hit_ns,
                m.hits_per_invocation.unwrap_or(0.0),
                ms(cut),
                ms(unc)
            );
        }
        _ => {
            let _ = writeln!(s, "probe cost: not subtracted (no probe hits counted)");
        }
    }
    let _ = writeln!(
        s,
        "\nFactors explaining the variance (k = {}, threshold {:.1} % of Var(root)):",
        r.config.k,
        r.config.threshold_share * 100.0
    );
    if r.selected.is_empty() {
        let _ = writeln!(
            s,
            "  none: no factor reaches the threshold (lower --threshold)"
        );
    }
    if r.literal_selected != r.selected {
        let literal = if r.literal_selected.is_empty() {
            "nothing".to_string()
        } else {
            r.literal_selected.join(", ")
        };
        let _ = writeln!(
            s,
            "  (Algorithm 1 as printed, stopping at the first factor under the threshold, would select {literal})"
        );
    }
    let _ = writeln!(
        s,
        "  {:>4}  {:<40} {:>9} {:>6} {:>11} {:>9}",
        "rank", "factor", "share", "height", "specificity", "resp/Var"
    );
    let shown = r
        .factors
        .iter()
        .filter(|f| f.selected || f.rank <= r.config.k.max(5));
    for f in shown {
        let mark = match (f.selected, f.kept) {
            (true, true) => " *kept",
            (true, false) => " *",
            _ => "",
        };
        let _ = writeln!(
            s,
            "  {:>4}  {:<40} {:>8.1}% {:>6} {:>11} {:>9.3}{mark}",
            f.rank,
            truncate(&f.factor, 40),
            f.share * 100.0,
            f.height,
            f.specificity,
            f.responsibility / r.root_variance_ns2,
        );
    }
    for r in &r.rounds {
        if let Some(o) = &r.unnamed_opened {
            let _ = writeln!(
                s,
                "  round {}: {} held {:.1} % of Var(root), and {} calls code no symbol names: from round {} such calls are children, named sub_ADDRESS (img is a function's own statements, not its callees: VProfiler Sec. 3.1)",
                r.round,
                o.factor,
                o.share * 100.0,
                o.function,
                r.round + 1
            );
        }
    }
    if !r.unnamed.is_empty() {
        let list: Vec<String> = r
            .unnamed
            .iter()
            .map(|u| format!("{} = {}", u.name, u.near))
            .collect();
        let _ = writeln!(
            s,
            "  functions without a symbol, by the nearest symbol before them: {}",
            list.join(", ")
        );
    }
    if r.stopped_early {
        let _ = writeln!(
            s,
            "  (stopped after --rounds {}: selected functions could be broken down further)",
            r.config.max_rounds
        );
    }
    let _ = writeln!(s, "\nVariance tree (share of Var(root)):");
    write_node(r, &mut s, 0, "", true, min_share);
    s
}

fn write_node(
    r: &VprofileReport,
    s: &mut String,
    id: usize,
    prefix: &str,
    last: bool,
    min_share: f64,
) {
    let n = &r.tree[id];
    let (branch, child_prefix) = if id == 0 {
        ("", String::new())
    } else if last {
        ("└─ ", format!("{prefix}   "))
    } else {
        ("├─ ", format!("{prefix}│  "))
    };
    let mean = n
        .mean_ns
        .map(|m| format!("  mean {}", ms(m)))
        .unwrap_or_default();
    let zeroed = if n.zeroed {
        "  (explained by a child)"
    } else {
        ""
    };
    let neg = if n.negative_invocations > 0 {
        format!(
            "  ({} invocations with children longer than the parent)",
            n.negative_invocations
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "{prefix}{branch}{} {:.1} %{mean}{zeroed}{neg}",
        n.term,
        n.share * 100.0
    );
    let children: Vec<usize> = r
        .tree
        .iter()
        .filter(|c| c.parent == Some(id))
        .map(|c| c.id)
        .collect();
    let (shown, folded): (Vec<usize>, Vec<usize>) = children
        .into_iter()
        .partition(|&c| r.tree[c].share.abs() >= min_share);
    let mut shown = shown;
    shown.sort_by(|a, b| r.tree[*b].share.total_cmp(&r.tree[*a].share));
    for (i, &c) in shown.iter().enumerate() {
        let last = i + 1 == shown.len() && folded.is_empty();
        write_node(r, s, c, &child_prefix, last, min_share);
    }
    if !folded.is_empty() {
        let sum: f64 = folded.iter().map(|&c| r.tree[c].share).sum();
        let _ = writeln!(
            s,
            "{child_prefix}└─ {} more terms under {:.1} % each, {:.1} % together",
            folded.len(),
            min_share * 100.0,
            sum * 100.0
        );
    }
}
/// Nanoseconds as milliseconds with three decimals.
fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}
