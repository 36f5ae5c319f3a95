//! `ttp.attach/1` (the summary of `attach --json`), read back: the
//! terminal summary, a per-process table, and a chart of where each
//! process's time went. The document's types are in attach_doc.rs, its
//! text in attach_text.rs.
use std::path::{Path, PathBuf};

use plotters::prelude::*;

pub(crate) use super::attach_doc::ATTACH_SCHEMA;
pub use super::attach_doc::{
    AgreementView, AttachDoc, CpuView, LostView, MachineView, OverallView, ProcessView, WindowView,
};
pub use super::attach_text::{DEFAULT_TOP, TextOptions};
use super::{
    rendered::{RenderError, Rendered, write_plot},
    table::{Table, ms3, num},
};
use crate::report::{
    chart::{self, Key},
    losses::{self, Affects},
};
use ttp_ledger::accounts::LedgerMeasures;

impl AttachDoc {
    /// The document as JSON: a measure not taken is null, not 0.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        let not_taken = self.not_taken();
        for list in ["processes", "exited_groups"] {
            if let Some(rows) = v.get_mut(list).and_then(|l| l.as_array_mut()) {
                for row in rows {
                    if let Some(k) = row.get_mut("kernel").and_then(|k| k.as_object_mut()) {
                        for name in &not_taken {
                            k.insert((*name).into(), serde_json::Value::Null);
                        }
                    }
                }
            }
        }
        v
    }

    /// The counters the ledger did not measure in this window: null in
    /// the JSON, empty in the tables.
    fn not_taken(&self) -> Vec<&'static str> {
        let mut not_taken = Vec::new();
        if self.wake_latency_measured == Some(false) {
            not_taken.push("wake_latency_ns");
        }
        if self.irq_time_measured != Some(true) {
            not_taken.push("irq_ns");
        }
        not_taken
    }

    /// What the summary says of wake latency: the total over the rows, or
    /// that it was not measured and how to measure it.
    fn wake_latency_line(&self) -> String {
        let Some(measured) = self.wake_latency_measured else {
            return String::new();
        };
        if !measured {
            return "wake latency: not measured (no program runs at wake-ups by default; `attach --wake-latency` measures it)\n".into();
        }
        let (ns, wakeups) = self.processes.iter().fold((0u64, 0u64), |(n, w), p| {
            (n + p.kernel.wake_latency_ns, w + p.kernel.wakeups)
        });
        format!(
            "wake latency (wall clock, wake-up or preemption → switch-in): {} ms over {} wake-ups\n",
            ms3(Some(ns as f64)),
            wakeups
        )
    }

    /// Every loss and repair of the window, in words.
    fn losses(&self) -> Vec<losses::Loss> {
        let extra = losses::Extra {
            vanished_threads: u64::from(self.lost.vanished_threads),
            recursion_misses: self.probe_cost.as_ref().map_or(0, |c| c.lost_events()),
            taskstats_overflows: self.lost.taskstats_listener_overflows,
        };
        losses::describe(&self.lost.kernel, &extra)
    }

    /// The terminal summary (attach_text.rs), then the exit records, the
    /// probes' cost, the losses in words and the notes.
    pub(crate) fn text_with(&self, o: &TextOptions) -> String {
        let losses = self.losses();
        let mut out = super::attach_text::text(self, o, &losses);
        if let Some(n) = self.taskstats_exit_records {
            let ledger_exits = self.processes.iter().filter(|p| p.exited).count();
            out.push_str(&format!(
                "exited processes: {ledger_exits} in the ledger, {n} exit records from taskstats{}\n",
                losses::mark(&losses, Affects::Taskstats)
            ));
        }
        out.push_str(&self.wake_latency_line());
        if let Some(c) = &self.probe_cost {
            out.push_str(&crate::report::probe_cost::lines(c, "window"));
        }
        out.push_str(&losses::lines(&losses));
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out
    }
}

impl Rendered for AttachDoc {
    fn title(&self) -> String {
        format!(
            "ttp attach: {} process(es) over {:.3} s",
            super::attach_text::process_count(self),
            self.window.end_ns.saturating_sub(self.window.start_ns) as f64 / 1e9
        )
    }

    fn text(&self) -> String {
        self.text_with(&TextOptions::default())
    }

    fn table(&self) -> Table {
        // Every ledger counter, from its one declaration; times in ms.
        let column = |name: &'static str| match name.strip_suffix("_ns") {
            Some(stem) => format!("{stem}_ms"),
            None => name.to_string(),
        };
        let mut head: Vec<String> = vec!["pid".into(), "comm".into(), "threads".into()];
        head.extend(
            LedgerMeasures::default()
                .named()
                .into_iter()
                .map(|(n, _)| column(n)),
        );
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        let mut t = Table::new(&head);
        let not_taken = self.not_taken();
        for p in &self.processes {
            t.push(measures_row(
                [p.pid.to_string(), p.comm.clone(), p.threads.to_string()],
                &p.kernel,
                &not_taken,
            ));
        }
        for g in &self.exited_groups {
            t.push(measures_row(
                [
                    String::new(),
                    format!("{} ({} ended, summed)", g.comm, g.processes),
                    g.threads.to_string(),
                ],
                &g.kernel,
                &not_taken,
            ));
        }
        t
    }

    fn markdown(&self) -> String {
        let t = &self.overall.kernel.total;
        // A total row under several processes (the tree of --children, the
        // machine's processes of --all); CSV keeps one row per process so
        // that a column sums to the total.
        let mut table = self.table();
        let count = super::attach_text::process_count(self);
        if count > 1 {
            let threads: u64 = self
                .processes
                .iter()
                .map(|p| u64::from(p.threads))
                .sum::<u64>()
                + self.exited_groups.iter().map(|g| g.threads).sum::<u64>();
            table.push(measures_row(
                [
                    String::new(),
                    format!("total ({count} processes)"),
                    threads.to_string(),
                ],
                &super::attach_text::total(self),
                &self.not_taken(),
            ));
        }
        format!(
            "**{}**\n\n{}\nMachine: busy {} ms, idle {} ms, iowait {} ms over {} CPUs{}.\n",
            self.title(),
            table.markdown(),
            num(Some(t.busy_ns as f64 / 1e6)),
            num(Some(t.idle_ns as f64 / 1e6)),
            num(Some(t.iowait_ns as f64 / 1e6)),
            self.overall.kernel.cpus.len(),
            self.kernel_release
                .as_ref()
                .map(|k| format!("; kernel {k}"))
                .unwrap_or_default()
        )
    }

    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
        Ok(vec![write_plot(
            dir,
            "attach_time.svg",
            &time_chart(self)?,
        )?])
    }
}

/// One table row: the process columns, then every ledger counter from its
/// one declaration (times in ms with three decimals).
fn measures_row(head: [String; 3], k: &LedgerMeasures, not_taken: &[&str]) -> Vec<String> {
    let mut row = Vec::from(head);
    row.extend(k.named().into_iter().map(|(n, v)| {
        if not_taken.contains(&n) {
            String::new()
        } else if n.ends_with("_ns") {
            ms3(Some(v as f64))
        } else {
            v.to_string()
        }
    }));
    row
}

/// A stacked part of a bar: its legend, colour and measure.
type Part = (&'static str, RGBColor, fn(&LedgerMeasures) -> u64);

/// Where each process's time went, as stacked horizontal bars (ms): the
/// busiest processes first (as the text summary lists them), the rest
/// summed in one bar, the legend in a column of its own.
fn time_chart(d: &AttachDoc) -> Result<String, RenderError> {
    let err = |e: &dyn std::fmt::Display| RenderError::Plot {
        what: "attach_time.svg".into(),
        detail: e.to_string(),
    };
    let parts: [Part; 6] = [
        ("on CPU", RGBColor(44, 160, 44), |k| k.on_cpu_ns),
        ("run queue", RGBColor(255, 127, 14), |k| k.runq_wait_ns),
        ("iowait, own I/O", RGBColor(31, 119, 180), |k| {
            k.iowait_own_ns
        }),
        ("iowait, other", RGBColor(158, 202, 225), |k| {
            k.iowait_ns.saturating_sub(k.iowait_own_ns)
        }),
        ("blocked", RGBColor(214, 39, 40), |k| k.blocked_ns),
        ("sleep", RGBColor(199, 199, 199), |k| k.sleep_ns),
    ];
    let sorted = super::attach_text::by_on_cpu(d);
    let shown = sorted.len().min(DEFAULT_TOP);
    let mut bars: Vec<(String, LedgerMeasures)> = sorted[..shown]
        .iter()
        .map(|p| (format!("{} ({})", p.comm, p.pid), p.kernel))
        .collect();
    if shown < sorted.len() {
        let mut rest = LedgerMeasures::default();
        sorted[shown..].iter().for_each(|p| rest += p.kernel);
        bars.push((format!("{} more processes", sorted.len() - shown), rest));
    }
    let n = bars.len().max(1);
    let total = |k: &LedgerMeasures| {
        parts
            .iter()
            .fold(0u64, |a, (_, _, f)| a.saturating_add(f(k)))
    };
    let x_max = bars
        .iter()
        .map(|(_, k)| total(k) as f64 / 1e6)
        .fold(1.0, f64::max)
        * 1.05;
    // Bar i (busiest first, from the top) is centred on y = n − 1 − i, so
    // the axis labels its whole numbers with the names.
    let row_y = |i: usize| (n - 1 - i) as f64;
    let mut svg = String::new();
    {
        // Room for the six legend rows even with one bar.
        let height = (120 + 40 * n as u32).max(200);
        let root = SVGBackend::with_string(&mut svg, (900, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let root = root
            .titled(&d.title(), ("sans-serif", 18))
            .map_err(|e| err(&e))?;
        let (plot, legend_area) = chart::split(&root, 160);
        let mut chart = ChartBuilder::on(&plot)
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(170)
            .build_cartesian_2d(0f64..x_max, -0.5f64..n as f64 - 0.5)
            .map_err(|e| err(&e))?;
        let name = |v: &f64| {
            let r = v.round();
            if (v - r).abs() < 1e-6 && r >= 0.0 && (r as usize) < n {
                bars.get(n - 1 - r as usize)
                    .map(|b| b.0.clone())
                    .unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("ms")
            .y_labels(n + 1)
            .y_label_formatter(&name)
            .draw()
            .map_err(|e| err(&e))?;
        for (k, (_, color, f)) in parts.iter().enumerate() {
            let rects: Vec<Rectangle<(f64, f64)>> = bars
                .iter()
                .enumerate()
                .map(|(i, (_, m))| {
                    let before: u64 = parts[..k]
                        .iter()
                        .fold(0u64, |a, (_, _, g)| a.saturating_add(g(m)));
                    let x0 = before as f64 / 1e6;
                    let x1 = x0 + f(m) as f64 / 1e6;
                    let y = row_y(i);
                    Rectangle::new([(x0, y - 0.35), (x1, y + 0.35)], color.filled())
                })
                .collect();
            chart.draw_series(rects).map_err(|e| err(&e))?;
        }
        let legend: Vec<(String, Key)> = parts
            .iter()
            .map(|(label, color, _)| (label.to_string(), Key::Square(*color)))
            .collect();
        chart::draw(&legend_area, &legend, 10).map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}
