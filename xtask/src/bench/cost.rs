//! The per-program table of `bench overhead`: each probe's runs and mean ns
//! a run, from the kernel's BPF statistics as `ttp-ebpf attach --json`
//! reports them (`probe_cost`, probe/cost.rs in ttp-user), summed over the
//! rounds' attach windows. The kernel times each program run by itself, so
//! these figures do not depend on the noise of the wall-clock ratio.
use std::{collections::BTreeMap, path::Path};

use anyhow::Context;

#[derive(Default)]
struct Row {
    runs: u64,
    run_time_ns: u64,
    recursion_misses: u64,
}

/// Per program, the sums over every attach window read so far.
#[derive(Default)]
pub struct ProgramTable {
    rows: BTreeMap<String, Row>,
    windows: u32,
    window_ns: u64,
}

impl ProgramTable {
    /// Adds the `probe_cost` of one `attach --json` file.
    pub fn add(&mut self, attach_json: &Path) -> anyhow::Result<()> {
        let text = std::fs::read_to_string(attach_json)
            .with_context(|| format!("reading {}", attach_json.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("parsing {}", attach_json.display()))?;
        let cost = &v["probe_cost"];
        let programs = cost["programs"].as_array().with_context(|| {
            format!(
                "{} has no probe_cost: the kernel refused BPF statistics (see its notes)",
                attach_json.display()
            )
        })?;
        for p in programs {
            let name = p["program"].as_str().unwrap_or("?").to_string();
            let row = self.rows.entry(name).or_default();
            row.runs += p["runs"].as_u64().unwrap_or(0);
            row.run_time_ns += p["run_time_ns"].as_u64().unwrap_or(0);
            row.recursion_misses += p["recursion_misses"].as_u64().unwrap_or(0);
        }
        self.windows += 1;
        self.window_ns += cost["window_ns"].as_u64().unwrap_or(0);
        Ok(())
    }

    /// Adds one window of programs measured elsewhere (the floor's empty
    /// programs): (name, runs, run time ns) each.
    pub fn add_rows(&mut self, rows: &[(String, u64, u64)]) {
        for (name, runs, ns) in rows {
            let row = self.rows.entry(name.clone()).or_default();
            row.runs += runs;
            row.run_time_ns += ns;
        }
        self.windows += 1;
    }

    pub fn print(&self) {
        self.print_titled("attach --all");
    }

    /// The table, under "per-program cost of WHAT".
    pub fn print_titled(&self, what: &str) {
        if self.windows == 0 {
            return;
        }
        println!(
            "per-program cost of {what} (kernel BPF statistics, {} windows{}):",
            self.windows,
            if self.window_ns > 0 {
                format!(", {:.1} s in all", self.window_ns as f64 / 1e9)
            } else {
                String::new()
            }
        );
        println!(
            "  {:<20} {:>12} {:>8} {:>10} {:>10}",
            "program", "runs", "ns/run", "CPU ms", "rec. miss"
        );
        let mut rows: Vec<_> = self.rows.iter().filter(|(_, r)| r.runs > 0).collect();
        rows.sort_by_key(|(_, r)| std::cmp::Reverse(r.run_time_ns));
        let mut unsampled = false;
        for (name, r) in rows {
            // ttp times its programs in short windows (probe/cost.rs): a
            // program that never ran inside one has its runs but no time.
            let per_run = if r.run_time_ns == 0 {
                unsampled = true;
                "n/a".to_string()
            } else {
                format!("{:.0}", r.run_time_ns as f64 / r.runs as f64)
            };
            println!(
                "  {name:<20} {:>12} {per_run:>8} {:>10.2} {:>10}",
                r.runs,
                r.run_time_ns as f64 / 1e6,
                r.recursion_misses
            );
        }
        if unsampled {
            println!("  (n/a: no run fell inside a statistics window)");
        }
    }
}
