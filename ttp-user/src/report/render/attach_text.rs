//! The attach summary as text: the cross-check tally first, then the
//! processes by on-CPU time (the first `top`, the rest in one totals line),
//! a total over all of them, and the machine.
//!
//! `attach --all` covers every process on the machine (hundreds, most of
//! them idle kernel threads): in pid order with every cross-check line the
//! summary ran to ~800 lines and hid the few processes that used the
//! machine. As `top` and `htop` do, the busiest come first and the idle
//! tail is summed; as test runners do, the comparisons are tallied first
//! and only the failures listed (docs/attach.md, "The summary").
use super::attach_doc::{AgreementView, AttachDoc, ProcessView};
use crate::report::{
    losses::{self, Affects, Loss},
    units::{bytes, grouped, ms},
};
use ttp_ledger::accounts::LedgerMeasures;

/// How much of the summary to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextOptions {
    /// Processes listed, busiest first; the rest are summed in one line.
    /// `None` lists them all.
    pub top: Option<usize>,
    /// Every cross-check line, not only the flagged ones. A summary of one
    /// process shows every line regardless.
    pub all_checks: bool,
}

/// Processes listed by default (`--top`).
pub const DEFAULT_TOP: usize = 20;

impl Default for TextOptions {
    fn default() -> Self {
        Self {
            top: Some(DEFAULT_TOP),
            all_checks: false,
        }
    }
}

/// The verdict of one cross-check row.
fn verdict(a: &AgreementView) -> &'static str {
    if a.informational.is_some() {
        "info"
    } else if a.within {
        "ok"
    } else {
        "FLAG"
    }
}

fn agreement_line(a: &AgreementView) -> String {
    // A reference read around the ledger's images names the range it can
    // have had at the ledger's own reads.
    let range = match (a.kernel_low, a.kernel_high) {
        (Some(lo), Some(hi)) => format!(", at the ledger's reads {lo}..{hi}"),
        _ => String::new(),
    };
    format!(
        "    [{:>4}] {:<14} {:>12} vs {:<32} {:>12}  ({:+.2}%{range}, tolerance {}){}\n",
        verdict(a),
        a.measure,
        a.ledger,
        a.reference,
        a.kernel,
        a.rel_diff.unwrap_or(f64::INFINITY) * 100.0,
        a.tolerance,
        a.informational
            .as_ref()
            .map(|w| format!(" — {w}"))
            .unwrap_or_default()
    )
}

/// `ok`, `FLAG` and `info` counts over every process and the machine.
fn tally(d: &AttachDoc) -> [usize; 3] {
    let mut n = [0; 3];
    let rows = d
        .processes
        .iter()
        .flat_map(|p| &p.agreement)
        .chain(&d.overall.agreement);
    for a in rows {
        n[match verdict(a) {
            "ok" => 0,
            "FLAG" => 1,
            _ => 2,
        }] += 1;
    }
    n
}

/// One process's measures after its name (`on-CPU …, run-queue …`).
fn times(k: &LedgerMeasures) -> String {
    format!(
        "on-CPU {} ms, run-queue {} ms, sleep {} ms, blocked {} ms, iowait {} ms (own I/O {} ms, share of machine iowait {} ms)",
        ms(k.on_cpu_ns),
        ms(k.runq_wait_ns),
        ms(k.sleep_ns),
        ms(k.blocked_ns),
        ms(k.iowait_ns),
        ms(k.iowait_own_ns),
        ms(k.iowait_share_ns),
    )
}

fn io(k: &LedgerMeasures) -> String {
    format!(
        "I/O: {} reads ({}), {} writes ({}), device {} ms, queued {} ms; switches {} voluntary, {} involuntary",
        k.io.read_requests,
        bytes(k.io.read_bytes),
        k.io.write_requests,
        bytes(k.io.write_bytes),
        ms(k.io.device_ns),
        ms(k.io.queue_ns),
        k.voluntary_switches,
        k.involuntary_switches,
    )
}

fn sum<'a>(ps: impl IntoIterator<Item = &'a ProcessView>) -> (usize, LedgerMeasures) {
    let mut total = LedgerMeasures::default();
    let mut n = 0;
    for p in ps {
        total += p.kernel;
        n += 1;
    }
    (n, total)
}

/// The processes busiest first: on-CPU time, then iowait, then pid.
pub(crate) fn by_on_cpu(d: &AttachDoc) -> Vec<&ProcessView> {
    let mut rows: Vec<&ProcessView> = d.processes.iter().collect();
    rows.sort_by_key(|p| {
        (
            std::cmp::Reverse(p.kernel.on_cpu_ns),
            std::cmp::Reverse(p.kernel.iowait_ns),
            p.pid,
        )
    });
    rows
}

/// The total over every process of the summary (`--children`: the tree;
/// `--all`: the machine's processes).
/// Ended processes folded by command (beyond `--keep-exited`) count too.
pub(crate) fn total(d: &AttachDoc) -> LedgerMeasures {
    let mut k = sum(&d.processes).1;
    for g in &d.exited_groups {
        k += g.kernel;
    }
    k
}

/// Processes the summary covers: rows and folded ones.
pub(crate) fn process_count(d: &AttachDoc) -> u64 {
    d.processes.len() as u64 + d.exited_groups.iter().map(|g| g.processes).sum::<u64>()
}

/// The line of the ended processes folded by command, its three busiest
/// commands named.
fn groups_line(d: &AttachDoc) -> Option<String> {
    if d.exited_groups.is_empty() {
        return None;
    }
    let mut k = LedgerMeasures::default();
    let mut n = 0;
    for g in &d.exited_groups {
        k += g.kernel;
        n += g.processes;
    }
    let names: Vec<String> = d
        .exited_groups
        .iter()
        .take(3)
        .map(|g| format!("{} ×{}", g.comm, grouped(g.processes)))
        .collect();
    Some(format!(
        "{} more ended processes, summed by command (beyond the rows --keep-exited keeps; busiest {}{}): {}\n",
        grouped(n),
        names.join(", "),
        if d.exited_groups.len() > 3 {
            ", …"
        } else {
            ""
        },
        times(&k)
    ))
}

/// The on-CPU time without interrupts beside the kernel's (`--irq-time`).
fn irq_line(k: &LedgerMeasures) -> String {
    format!(
        "    on-CPU without interrupts {} ms (the kernel's on-CPU {} ms less {} ms of interrupt handlers)\n",
        ms(k.on_cpu_ns.saturating_sub(k.irq_ns)),
        ms(k.on_cpu_ns),
        ms(k.irq_ns),
    )
}

fn process_lines(out: &mut String, p: &ProcessView, irq: bool, show_all: bool, losses: &[Loss]) {
    out.push_str(&format!(
        "pid {} ({}){}, {} thread(s): {}{}\n",
        p.pid,
        p.comm,
        if p.exited { ", exited" } else { "" },
        p.threads,
        times(&p.kernel),
        losses::mark(losses, Affects::Processes),
    ));
    if irq {
        out.push_str(&irq_line(&p.kernel));
    }
    out.push_str(&format!(
        "    {}{}\n",
        io(&p.kernel),
        losses::mark(losses, Affects::Io)
    ));
    for a in p
        .agreement
        .iter()
        .filter(|a| show_all || verdict(a) == "FLAG")
    {
        out.push_str(&agreement_line(a));
    }
}

/// The terminal summary of an attach document.
pub fn text(d: &AttachDoc, o: &TextOptions, losses: &[Loss]) -> String {
    let w = &d.window;
    let mut out = format!(
        "== summary over {:.3} s ==\n",
        w.end_ns.saturating_sub(w.start_ns) as f64 / 1e9
    );
    let show_all = o.all_checks || d.processes.len() == 1;
    let [ok, flagged, info] = tally(d);
    out.push_str(&format!(
        "cross-check against the kernel's own counters: {ok} ok, {flagged} flagged, {info} informational{}\n",
        if show_all || ok + info == 0 {
            ""
        } else {
            " (flagged ones shown; --checks shows every comparison)"
        }
    ));
    let rows = by_on_cpu(d);
    let shown = o.top.unwrap_or(usize::MAX).min(rows.len());
    for p in &rows[..shown] {
        process_lines(
            &mut out,
            p,
            d.irq_time_measured == Some(true),
            show_all,
            losses,
        );
    }
    if shown < rows.len() {
        let (n, k) = sum(rows[shown..].iter().copied());
        let flagged_rest = rows[shown..]
            .iter()
            .flat_map(|p| &p.agreement)
            .filter(|a| verdict(a) == "FLAG")
            .count();
        out.push_str(&format!(
            "{} more processes (--top 0 lists every one): {}; {} reads, {} writes{}\n",
            grouped(n as u64),
            times(&k),
            k.io.read_requests,
            k.io.write_requests,
            if flagged_rest > 0 {
                format!("; {flagged_rest} flagged comparisons among them")
            } else {
                String::new()
            }
        ));
    }
    if let Some(l) = groups_line(d) {
        out.push_str(&l);
    }
    if process_count(d) > 1 {
        let k = total(d);
        out.push_str(&format!(
            "total of the {} processes: {}\n    {}\n",
            grouped(process_count(d)),
            times(&k),
            io(&k)
        ));
    }
    let t = &d.overall.kernel.total;
    out.push_str(&format!(
        "machine ({} CPUs): busy {} ms, idle {} ms, iowait {} ms{}\n",
        d.overall.kernel.cpus.len(),
        ms(t.busy_ns),
        ms(t.idle_ns),
        ms(t.iowait_ns),
        losses::mark(losses, Affects::Machine)
    ));
    for a in &d.overall.agreement {
        out.push_str(&agreement_line(a));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a flagged comparison shown without the range it was held
    /// to (the reader could not tell why a 2 % difference is accepted).
    #[test]
    fn a_bracketed_comparison_shows_its_range() {
        let mut a = AgreementView {
            measure: "on_cpu_ns".into(),
            ledger: 246_914_429,
            reference: "schedstat sum_exec_runtime".into(),
            kernel: 253_055_781,
            rel_diff: Some(-0.0243),
            tolerance: 2_530_557,
            kernel_low: Some(245_365_858),
            kernel_high: Some(253_143_856),
            within: true,
            informational: None,
        };
        let line = agreement_line(&a);
        assert!(
            line.contains("[  ok]") && line.contains("at the ledger's reads 245365858..253143856"),
            "{line}"
        );
        (a.kernel_low, a.kernel_high) = (None, None);
        assert!(!agreement_line(&a).contains("ledger's reads"));
    }

    /// The saved summary of one `sleep` (fixtures/attach-1.json), its
    /// process copied `n` times with on-CPU time `i` ms for copy `i`; copy
    /// 3's first comparison is made to fail.
    fn doc(n: u32) -> AttachDoc {
        let text = include_str!("fixtures/attach-1.json");
        let mut d: AttachDoc = serde_json::from_str(text).unwrap();
        let one = d.processes[0].clone();
        d.processes = (1..=n)
            .map(|i| {
                let mut p = one.clone();
                p.pid = 1000 + i;
                p.kernel.on_cpu_ns = u64::from(i) * 1_000_000;
                p.kernel.sleep_ns = 10_000_000;
                if i == 3 {
                    p.agreement[0].within = false;
                }
                p
            })
            .collect();
        d
    }

    /// 25 processes: the 20 busiest are listed busiest first, the other 5
    /// (1..=5 ms on-CPU, 15 ms) in one line, the total over all 25 (325 ms,
    /// 250 ms sleep) below; the tally counts every comparison (25 × 9
    /// process rows, of which 25 × 3 informational and one made to fail, and
    /// the fixture's two machine rows, one flagged) and only the flagged
    /// ones are listed. Catches the summary
    /// in pid order, every process and comparison printed, a missing tree
    /// total.
    #[test]
    fn busiest_first_rest_summed_and_only_flags_listed() {
        let d = doc(25);
        let t = text(&d, &TextOptions::default(), &[]);
        let pids: Vec<&str> = t
            .lines()
            .filter_map(|l| l.strip_prefix("pid "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        let want: Vec<String> = (6..=25).rev().map(|i| (1000 + i).to_string()).collect();
        assert_eq!(pids, want, "{t}");
        assert!(
            t.contains(
                "cross-check against the kernel's own counters: 150 ok, 2 flagged, 75 informational"
            ),
            "{t}"
        );
        assert!(
            t.contains("5 more processes (--top 0 lists every one): on-CPU 15.00 ms, run-queue 0.00 ms, sleep 50.00 ms"),
            "{t}"
        );
        assert!(
            t.contains(
                "total of the 25 processes: on-CPU 325.00 ms, run-queue 0.00 ms, sleep 250.00 ms"
            ),
            "{t}"
        );
        let process_checks = t.lines().filter(|l| l.starts_with("    [")).count();
        // Copy 3's flag is in the summed tail (named in its line): only the
        // machine's two rows, always shown, are listed.
        assert_eq!(process_checks, 2, "{t}");
        assert!(t.contains("; 1 flagged comparisons among them"), "{t}");
    }

    /// `--top 0 --checks` lists everything; one process lists every
    /// comparison without being asked.
    #[test]
    fn everything_on_request_and_for_one_process() {
        let d = doc(25);
        let all = TextOptions {
            top: None,
            all_checks: true,
        };
        let t = text(&d, &all, &[]);
        assert_eq!(t.lines().filter(|l| l.starts_with("pid ")).count(), 25);
        assert_eq!(t.lines().filter(|l| l.starts_with("    [")).count(), 227);
        assert!(!t.contains("more processes"));
        let one = text(&doc(1), &TextOptions::default(), &[]);
        assert_eq!(one.lines().filter(|l| l.starts_with("    [")).count(), 11);
        assert!(!one.contains("total of the"), "{one}");
    }

    /// The Markdown table ends with a total row (325 ms on-CPU over the 25
    /// copies); one process has none. Catches `--children` without a tree
    /// total.
    #[test]
    fn markdown_has_a_total_row() {
        use crate::report::render::Rendered;
        let md = doc(25).markdown();
        let last = md.lines().rfind(|l| l.starts_with('|')).unwrap();
        assert!(
            last.starts_with(
                "|  | total (25 processes) | 25 | 325.000 | 0.000 | 0.000 | 250.000 |"
            ),
            "{last}"
        );
        assert!(!doc(1).markdown().contains("total ("));
    }

    /// attach_time.svg: every legend label has its own colour's key on
    /// the same row (its centre at the label's y), in a column right of
    /// every bar; 25 processes give 20 bars and one for the other 5.
    /// Catches the legend's keys a row off their labels and a legend
    /// drawn over the bars.
    #[test]
    fn time_chart_legend_keys_sit_on_their_labels() {
        use crate::report::render::Rendered;
        let dir = std::env::temp_dir().join(format!("ttp-attach-chart-{}", std::process::id()));
        let files = doc(25).plots(&dir).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        let xml = roxmltree::Document::parse(&svg).unwrap();
        let f = |n: &roxmltree::Node, a: &str| n.attribute(a).and_then(|v| v.parse::<f64>().ok());
        let rects: Vec<(f64, f64, f64, f64, String)> = xml
            .descendants()
            .filter(|n| n.has_tag_name("rect"))
            .filter_map(|n| {
                Some((
                    f(&n, "x")?,
                    f(&n, "y")?,
                    f(&n, "width")?,
                    f(&n, "height")?,
                    n.attribute("fill")?.to_string(),
                ))
            })
            .collect();
        let texts: Vec<(f64, f64, String)> = xml
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| {
                (
                    f(&n, "x").unwrap(),
                    f(&n, "y").unwrap(),
                    n.text().unwrap_or("").trim().into(),
                )
            })
            .collect();
        let column = 900.0 - 160.0;
        for (label, fill) in [
            ("on CPU", "#2CA02C"),
            ("run queue", "#FF7F0E"),
            ("blocked", "#D62728"),
            ("sleep", "#C7C7C7"),
        ] {
            let t = texts.iter().find(|t| t.2 == label).unwrap();
            assert!(t.0 > column, "{label} at x {}", t.0);
            let key = rects
                .iter()
                .find(|r| r.0 > column && r.4 == fill)
                .unwrap_or_else(|| panic!("no {fill} key for {label}"));
            assert_eq!(
                key.1 + key.3 / 2.0,
                t.1,
                "{label}: key {key:?}, label y {}",
                t.1
            );
        }
        // Sleep bars (10 ms each here) are left of the legend column.
        let sleep_bars = rects
            .iter()
            .filter(|r| r.4 == "#C7C7C7" && r.0 < column)
            .count();
        assert_eq!(sleep_bars, 21);
        assert!(
            rects
                .iter()
                .filter(|r| r.4 == "#C7C7C7")
                .all(|r| r.0 > column || r.0 + r.2 <= column)
        );
        assert!(texts.iter().any(|t| t.2 == "5 more processes"));
    }

    /// Catches a wake latency written as 0 (or as a number) when the
    /// ledger had no wake-up hook, a null that cannot be read back, and a
    /// summary silent about how to get the measure.
    #[test]
    fn wake_latency_not_taken_is_null_and_said() {
        let mut d = doc(2);
        d.processes[0].kernel.wake_latency_ns = 1234;
        d.wake_latency_measured = Some(false);
        let v = d.to_json();
        for p in v["processes"].as_array().unwrap() {
            assert!(p["kernel"]["wake_latency_ns"].is_null(), "{p}");
            assert!(p["kernel"]["on_cpu_ns"].is_u64());
        }
        let back: AttachDoc = serde_json::from_value(v).unwrap();
        assert_eq!(back.wake_latency_measured, Some(false));
        let t = back.text_with(&TextOptions::default());
        assert!(t.contains("wake latency: not measured"), "{t}");
        assert!(t.contains("--wake-latency"), "{t}");
        d.wake_latency_measured = Some(true);
        let v = d.to_json();
        assert_eq!(v["processes"][0]["kernel"]["wake_latency_ns"], 1234);
        assert!(
            d.text_with(&TextOptions::default())
                .contains("wake latency (wall clock")
        );
    }

    /// Catches interrupt time written as 0 when the interrupt programs
    /// were not loaded, the line shown without them, or the on-CPU time
    /// without interrupts computed from anything but the two counters.
    #[test]
    fn interrupt_time_only_when_measured() {
        let mut d = doc(1);
        d.processes[0].kernel.on_cpu_ns = 50_000_000;
        d.processes[0].kernel.irq_ns = 2_500_000;
        d.irq_time_measured = None;
        assert!(d.to_json()["processes"][0]["kernel"]["irq_ns"].is_null());
        let t = d.text_with(&TextOptions::default());
        assert!(!t.contains("without interrupts"), "{t}");
        d.irq_time_measured = Some(true);
        let v = d.to_json();
        assert_eq!(v["processes"][0]["kernel"]["irq_ns"], 2_500_000);
        let back: AttachDoc = serde_json::from_value(v).unwrap();
        let t = back.text_with(&TextOptions::default());
        assert!(
            t.contains("on-CPU without interrupts 47.50 ms (the kernel's on-CPU 50.00 ms less 2.50 ms of interrupt handlers)"),
            "{t}"
        );
    }
}
