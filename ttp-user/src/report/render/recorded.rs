//! Files this build writes besides measurement results, read back: the
//! raw runs of `--record` (`ttp.emp-runs/1`), the set-up check of `check
//! --json` (`ttp.check/1`) and the INC run of `inc --json` (`ttp.inc/1`).
//! The check and INC texts are the ones the commands print (one function
//! each, used by both); the runs are shown as recorded — applying EMP to
//! them is `analyze`'s work.
use super::{
    rendered::Rendered,
    table::{Table, ms3},
};
use ttp_emp::{inc::IncReport, input::EmpRuns};
use ttp_sys::sys::setup_check::{CheckReport, Status};

pub(crate) struct Runs(pub EmpRuns);
pub(crate) struct Check(pub CheckReport);
pub struct Inc(pub IncReport);

/// The line `inc` prints.
pub(crate) fn inc_line(r: &IncReport) -> String {
    format!(
        "INC: {} iterations × {} increments (k = {}): CPU {:.3} s, elapsed {:.3} s; repeat with `ttp-ebpf inc --loops {}`\n",
        r.outer,
        r.inner,
        r.k,
        r.cpu_ns as f64 / 1e9,
        r.et_ns as f64 / 1e9,
        r.outer
    )
}

/// The report `check` prints; `fixed` when `--fix` ran.
pub(crate) fn check_text(r: &CheckReport, fixed: bool) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "ttp set-up check (EMPv1–v4, TTPv2 Step 0)");
    if !r.leftovers.is_empty() {
        let _ = writeln!(s, "Left behind by a ttp that was killed:");
        for l in &r.leftovers {
            let _ = writeln!(s, "  {l}");
        }
    }
    if !r.fixes.is_empty() {
        let _ = writeln!(s, "Applied (persistent until reboot):");
        for f in &r.fixes {
            let _ = match &f.error {
                None => writeln!(s, "  done    {}", f.action),
                Some(e) => writeln!(s, "  FAILED  {}: {e}", f.action),
            };
        }
    }
    for i in &r.items {
        let _ = writeln!(s, "  {}  {:<36} {}", tag(i.status), i.title, i.detail);
        if i.status != Status::Pass {
            let _ = writeln!(s, "        {:<36} ({})", "", i.source);
            if let Some(rem) = &i.remedy {
                let _ = writeln!(s, "        {:<36} remedy: {rem}", "");
            }
            if let Some(f) = &i.fix {
                let _ = writeln!(s, "        {:<36} --fix: {}", "", f.describe());
            }
        }
    }
    let fixable = r.items.iter().filter(|i| i.fix.is_some()).count();
    let _ = writeln!(
        s,
        "{} pass, {} warn, {} fail.",
        r.count(Status::Pass),
        r.count(Status::Warn),
        r.count(Status::Fail)
    );
    if fixable > 0 && !fixed {
        let _ = writeln!(
            s,
            "`sudo ttp-ebpf check --fix` applies the {fixable} fix(es) marked above; they persist until reboot."
        );
    }
    s
}

fn tag(s: Status) -> &'static str {
    match s {
        Status::Pass => "PASS",
        Status::Warn => "WARN",
        Status::Fail => "FAIL",
    }
}

impl Rendered for Inc {
    fn title(&self) -> String {
        format!("ttp inc: {} iterations", self.0.outer)
    }
    fn text(&self) -> String {
        inc_line(&self.0)
    }
    fn table(&self) -> Table {
        let r = &self.0;
        let mut t = Table::new(&[
            "outer",
            "inner",
            "k",
            "cpu_ms",
            "elapsed_ms",
            "target_cpu_ms",
            "iteration_cpu_ms",
        ]);
        t.push(vec![
            r.outer.to_string(),
            r.inner.to_string(),
            r.k.to_string(),
            ms3(Some(r.cpu_ns as f64)),
            ms3(Some(r.et_ns as f64)),
            ms3(r.target_cpu_ns.map(|n| n as f64)),
            ms3(r.calibration.map(|c| c.outer_cpu_ns as f64)),
        ]);
        t
    }
}

impl Rendered for Check {
    fn title(&self) -> String {
        format!(
            "ttp check: {} pass, {} warn, {} fail",
            self.0.count(Status::Pass),
            self.0.count(Status::Warn),
            self.0.count(Status::Fail)
        )
    }
    fn text(&self) -> String {
        check_text(&self.0, !self.0.fixes.is_empty())
    }
    fn table(&self) -> Table {
        let mut t = Table::new(&["id", "status", "title", "detail", "source", "remedy"]);
        for i in &self.0.items {
            t.push(vec![
                i.id.clone(),
                tag(i.status).to_lowercase(),
                i.title.clone(),
                i.detail.clone(),
                i.source.clone(),
                i.remedy.clone().unwrap_or_default(),
            ]);
        }
        t
    }
}

impl Rendered for Runs {
    fn title(&self) -> String {
        let warm = self.0.runs.iter().filter(|r| r.flags.warm_up).count();
        format!(
            "ttp EMP runs of `{}` ({} runs, {warm} of them warm-up, as recorded)",
            self.0.command.join(" "),
            self.0.runs.len()
        )
    }

    /// The runs as measured, one line each, and how to apply EMP to them.
    fn text(&self) -> String {
        let t = self.table();
        let mut out = format!("{}\n", self.title());
        let widths: Vec<usize> = (0..t.columns.len())
            .map(|i| {
                t.rows
                    .iter()
                    .map(|r| r[i].chars().count())
                    .chain([t.columns[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        // Numbers to the right, the flags (last) to the left.
        let last = widths.len() - 1;
        let line = |cells: &[String]| {
            let mut l = cells
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (c, w))| {
                    if i == last {
                        c.clone()
                    } else {
                        format!("{c:>w$}")
                    }
                })
                .collect::<Vec<_>>()
                .join("  ");
            l.push('\n');
            l
        };
        out.push_str(&line(&t.columns));
        for r in &t.rows {
            out.push_str(&line(r));
        }
        out.push_str(
            "These are raw runs: `ttp-ebpf analyze --sample-size FILE` applies EMPv6 to them (docs/emp.md).\n",
        );
        out
    }

    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "run",
            "start_ms",
            "et_ms",
            "pt_runtime_ms",
            "pt_ledger_ms",
            "pt_taskstats_ms",
            "daemons",
            "daemons_pt_ms",
            "flags",
        ]);
        let ms = |ns: Option<u64>| ms3(ns.map(|n| n as f64));
        for r in &self.0.runs {
            let mut flags = Vec::new();
            if r.flags.warm_up {
                flags.push("warm-up".to_string());
            }
            if let Some(f) = &r.flags.failed {
                flags.push(format!("failed: {f}"));
            }
            if r.flags.lost_records > 0 {
                flags.push(format!("{} records lost", r.flags.lost_records));
            }
            t.push(vec![
                r.index.to_string(),
                ms(r.start_offset_ns),
                ms(Some(r.et_ns)),
                ms(r.pt.runtime_ns),
                ms(r.pt.ledger_on_cpu_ns),
                ms(r.pt.taskstats_us.map(|us| us * 1_000)),
                r.daemons.len().to_string(),
                ms(Some(r.daemons.iter().map(|d| d.pt_ns).sum())),
                flags.join("; "),
            ]);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::report::render::load;

    /// A recorded run set as `--record` writes it: a warm-up run and a
    /// failed one with lost records, times in ns shown in ms with three
    /// decimals, daemons counted and summed. Catches `report` refusing the
    /// file ("may come from a newer version") and fields read wrong.
    #[test]
    fn recorded_runs_render() {
        let doc = json!({
            "schema": "ttp.emp-runs/1",
            "command": ["sleep", "0.05"],
            "runs": [
                {"index": 0, "et_ns": 52_658_000, "start_offset_ns": 0,
                 "pt": {"taskstats_us": 0, "ledger_on_cpu_ns": 2_068_000, "runtime_ns": 1_995_123},
                 "daemons": [{"name": "a", "pid": 1, "pt_ns": 1_000_000}, {"name": "b", "pid": 2, "pt_ns": 500}],
                 "flags": {"warm_up": true}},
                {"index": 1, "et_ns": 60_564_400, "pt": {"taskstats_us": 4000},
                 "flags": {"failed": "exit status 1", "lost_records": 3}}
            ]
        });
        let r = load(doc).unwrap();
        let csv = r.table().csv();
        assert_eq!(
            csv,
            "run,start_ms,et_ms,pt_runtime_ms,pt_ledger_ms,pt_taskstats_ms,daemons,daemons_pt_ms,flags\n\
             0,0.000,52.658,1.995,2.068,0.000,2,1.000,warm-up\n\
             1,,60.564,,,4.000,0,0.000,failed: exit status 1; 3 records lost\n"
        );
        assert!(r.text().starts_with(
            "ttp EMP runs of `sleep 0.05` (2 runs, 1 of them warm-up, as recorded)\n"
        ));
    }

    /// `check --json` and `inc --json` files render as the commands print
    /// them: the tally of items, the INC line with its CPU time in s.
    #[test]
    fn check_and_inc_files_render() {
        let check = json!({
            "schema": "ttp.check/1", "root": "/", "sample_ms": 1000,
            "items": [
                {"id": "kernel", "title": "Kernel", "source": "TTPv2 Step 0", "status": "pass", "detail": "6.18"},
                {"id": "smt", "title": "SMT", "source": "EMPv3", "status": "warn", "detail": "on",
                 "remedy": "turn SMT off"}
            ]
        });
        let t = load(check).unwrap().text();
        assert!(t.contains("  WARN  SMT"), "{t}");
        assert!(t.contains("remedy: turn SMT off"), "{t}");
        assert!(t.ends_with("1 pass, 1 warn, 0 fail.\n"), "{t}");
        let inc = json!({
            "schema": "ttp.inc/1", "outer": 20, "inner": 1_048_576, "k": 20_971_520,
            "cpu_ns": 116_404_000, "et_ns": 296_467_000
        });
        let r = load(inc).unwrap();
        assert_eq!(
            r.text(),
            "INC: 20 iterations × 1048576 increments (k = 20971520): CPU 0.116 s, elapsed 0.296 s; repeat with `ttp-ebpf inc --loops 20`\n"
        );
        assert!(
            r.table()
                .csv()
                .contains("\n20,1048576,20971520,116.404,296.467,,\n")
        );
    }
}
