//! `ttp.attach/1` (the summary of `attach --json`), read back: the
//! terminal summary, a per-process table, and a chart of where each
//! process's time went.
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use super::{
    RenderError, Rendered, Table,
    table::{ms3, num},
    write_plot,
};
use crate::{
    accounts::{CpuTimes, LedgerMeasures},
    collect::proc_stat::{CpuLine, CpuTicks},
    probe::{KernelStats, cost::ProbeCost},
    report::{
        losses::{self, Affects},
        units::{bytes, ms},
    },
    window::{
        crosscheck::Agreement,
        procs::{ProcCounters, TaskstatsCounters},
    },
};

/// Schema of the attach summary.
pub const ATTACH_SCHEMA: &str = "ttp.attach/1";

/// The attach summary (`attach --json`), written and read by this one type.
/// Fields added after the first files were written are `#[serde(default)]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttachDoc {
    pub schema: String,
    #[serde(default)]
    pub kernel_release: Option<String>,
    /// Kernel tick rate (CONFIG_HZ), when known.
    #[serde(default)]
    pub hz: Option<u64>,
    /// USER_HZ, the unit of /proc's tick counters.
    #[serde(default)]
    pub user_hz: Option<u64>,
    /// CPUs the ledger saw.
    #[serde(default)]
    pub cpus: Option<u64>,
    pub window: WindowView,
    pub lost: LostView,
    pub processes: Vec<ProcessView>,
    pub overall: OverallView,
    #[serde(default)]
    pub taskstats_exit_records: Option<u64>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// The probes' own cost (absent in files written before it existed, or
    /// when the kernel refused BPF statistics: a note says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_cost: Option<ProbeCost>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WindowView {
    pub start_ns: u64,
    pub end_ns: u64,
    #[serde(default)]
    pub duration_ns: u64,
    #[serde(default)]
    pub clock: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LostView {
    pub kernel: KernelStats,
    /// Threads in the first image with no end (lost records).
    #[serde(default)]
    pub vanished_threads: u32,
    #[serde(default)]
    pub taskstats_listener_overflows: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessView {
    pub pid: u32,
    pub comm: String,
    /// Parent tgid when the ledger saw the fork.
    #[serde(default)]
    pub parent_pid: Option<u32>,
    #[serde(default)]
    pub exited: bool,
    #[serde(default)]
    pub threads: u32,
    pub kernel: LedgerMeasures,
    /// /proc counters over the window (None: the process was gone).
    #[serde(default)]
    pub proc: Option<ProcCounters>,
    #[serde(default)]
    pub taskstats: Option<TaskstatsCounters>,
    #[serde(default)]
    pub agreement: Vec<AgreementView>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverallView {
    pub kernel: MachineView,
    /// /proc/stat over the window, all CPUs and per CPU.
    #[serde(default)]
    pub proc_stat: Option<CpuTicks>,
    #[serde(default)]
    pub proc_stat_per_cpu: Option<Vec<CpuLine>>,
    #[serde(default)]
    pub agreement: Vec<AgreementView>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MachineView {
    pub cpus: Vec<CpuView>,
    pub total: CpuTimes,
}

/// One CPU's busy / idle / iowait time from the ledger.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuView {
    pub cpu: u32,
    pub busy_ns: u64,
    pub idle_ns: u64,
    pub iowait_ns: u64,
}

/// One cross-check row (window/crosscheck.rs `Agreement`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgreementView {
    pub measure: String,
    pub ledger: u64,
    pub reference: String,
    pub kernel: u64,
    /// null in the file when the reference is 0 and the ledger is not.
    pub rel_diff: Option<f64>,
    pub tolerance: u64,
    pub within: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub informational: Option<String>,
}

impl From<&Agreement> for AgreementView {
    fn from(a: &Agreement) -> Self {
        Self {
            measure: a.measure.into(),
            ledger: a.ledger,
            reference: a.reference.into(),
            kernel: a.kernel,
            // JSON has no infinity: serde_json writes a non-finite float as null.
            rel_diff: a.rel_diff.is_finite().then_some(a.rel_diff),
            tolerance: a.tolerance,
            within: a.within,
            informational: a.informational.map(String::from),
        }
    }
}

fn agreement_lines(out: &mut String, rows: &[AgreementView]) {
    for a in rows {
        let mark = if a.informational.is_some() {
            "info"
        } else if a.within {
            "ok"
        } else {
            "FLAG"
        };
        out.push_str(&format!(
            "    [{mark:>4}] {:<14} {:>12} vs {:<32} {:>12}  ({:+.2}%, tolerance {}){}\n",
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
        ));
    }
}

impl AttachDoc {
    /// Every loss and repair of the window, in words.
    fn losses(&self) -> Vec<losses::Loss> {
        let extra = losses::Extra {
            vanished_threads: u64::from(self.lost.vanished_threads),
            recursion_misses: self.probe_cost.as_ref().map_or(0, |c| c.lost_events()),
            taskstats_overflows: self.lost.taskstats_listener_overflows,
        };
        losses::describe(&self.lost.kernel, &extra)
    }
}

impl Rendered for AttachDoc {
    fn title(&self) -> String {
        format!(
            "ttp attach: {} process(es) over {:.3} s",
            self.processes.len(),
            self.window.end_ns.saturating_sub(self.window.start_ns) as f64 / 1e9
        )
    }

    fn text(&self) -> String {
        let w = &self.window;
        let mut out = format!(
            "== summary over {:.3} s ==\n",
            w.end_ns.saturating_sub(w.start_ns) as f64 / 1e9
        );
        let losses = self.losses();
        for p in &self.processes {
            let k = &p.kernel;
            out.push_str(&format!(
                "pid {} ({}){}, {} thread(s): on-CPU {} ms, run-queue {} ms, sleep {} ms, blocked {} ms, iowait {} ms (own I/O {} ms, share of machine iowait {} ms){}\n",
                p.pid,
                p.comm,
                if p.exited { ", exited" } else { "" },
                p.threads,
                ms(k.on_cpu_ns),
                ms(k.runq_wait_ns),
                ms(k.sleep_ns),
                ms(k.blocked_ns),
                ms(k.iowait_ns),
                ms(k.iowait_own_ns),
                ms(k.iowait_share_ns),
                losses::mark(&losses, Affects::Processes),
            ));
            out.push_str(&format!(
                "    I/O: {} reads ({}), {} writes ({}), device {} ms, queued {} ms; switches {} voluntary, {} involuntary{}\n",
                k.io.read_requests,
                bytes(k.io.read_bytes),
                k.io.write_requests,
                bytes(k.io.write_bytes),
                ms(k.io.device_ns),
                ms(k.io.queue_ns),
                k.voluntary_switches,
                k.involuntary_switches,
                losses::mark(&losses, Affects::Io),
            ));
            agreement_lines(&mut out, &p.agreement);
        }
        let t = &self.overall.kernel.total;
        out.push_str(&format!(
            "machine ({} CPUs): busy {} ms, idle {} ms, iowait {} ms{}\n",
            self.overall.kernel.cpus.len(),
            ms(t.busy_ns),
            ms(t.idle_ns),
            ms(t.iowait_ns),
            losses::mark(&losses, Affects::Machine)
        ));
        agreement_lines(&mut out, &self.overall.agreement);
        if let Some(n) = self.taskstats_exit_records {
            let ledger_exits = self.processes.iter().filter(|p| p.exited).count();
            out.push_str(&format!(
                "exited processes: {ledger_exits} in the ledger, {n} exit records from taskstats{}\n",
                losses::mark(&losses, Affects::Taskstats)
            ));
        }
        if let Some(c) = &self.probe_cost {
            out.push_str(&crate::report::probe_cost::lines(c, "window"));
        }
        out.push_str(&losses::lines(&losses));
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out
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
        let f = |ns: u64| ms3(Some(ns as f64));
        for p in &self.processes {
            let mut row = vec![p.pid.to_string(), p.comm.clone(), p.threads.to_string()];
            row.extend(p.kernel.named().into_iter().map(|(n, v)| {
                if n.ends_with("_ns") {
                    f(v)
                } else {
                    v.to_string()
                }
            }));
            t.push(row);
        }
        t
    }

    fn markdown(&self) -> String {
        let t = &self.overall.kernel.total;
        format!(
            "**{}**\n\n{}\nMachine: busy {} ms, idle {} ms, iowait {} ms over {} CPUs{}.\n",
            self.title(),
            self.table().markdown(),
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

/// A stacked part of a bar: its legend, colour and measure.
type Part = (&'static str, RGBColor, fn(&LedgerMeasures) -> u64);

/// Where each process's time went, as stacked horizontal bars (ms).
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
    let n = d.processes.len().max(1);
    let total = |k: &LedgerMeasures| {
        parts
            .iter()
            .fold(0u64, |a, (_, _, f)| a.saturating_add(f(k)))
    };
    let x_max = d
        .processes
        .iter()
        .map(|p| total(&p.kernel) as f64 / 1e6)
        .fold(1.0, f64::max)
        * 1.05;
    let mut svg = String::new();
    {
        let height = 120 + 40 * n as u32;
        let root = SVGBackend::with_string(&mut svg, (900, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(d.title(), ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(170)
            .build_cartesian_2d(0f64..x_max, (0..n).into_segmented())
            .map_err(|e| err(&e))?;
        let labels: Vec<String> = d
            .processes
            .iter()
            .map(|p| format!("{} ({})", p.comm, p.pid))
            .collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("ms")
            .y_labels(n)
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .draw()
            .map_err(|e| err(&e))?;
        for (name, color, f) in parts {
            let bars: Vec<Rectangle<(f64, SegmentValue<usize>)>> = d
                .processes
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let before: u64 = parts
                        .iter()
                        .take_while(|(n2, _, _)| *n2 != name)
                        .fold(0u64, |a, (_, _, g)| a.saturating_add(g(&p.kernel)));
                    let x0 = before as f64 / 1e6;
                    let x1 = x0 + f(&p.kernel) as f64 / 1e6;
                    Rectangle::new(
                        [
                            (x0, SegmentValue::Exact(i)),
                            (x1, SegmentValue::Exact(i + 1)),
                        ],
                        color.filled(),
                    )
                })
                .collect();
            chart
                .draw_series(bars)
                .map_err(|e| err(&e))?
                .label(name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}
