//! What a calibration ran, against the paper's procedure (Sec. 4.5.1):
//! Step 1, "a single INC run (specifically, INC128) for many samples
//! (specifically, 800)", over 28 hours; Step 7, "a small number of
//! executions (40) of INC16384 … about 4.5 hours [each] … around eight
//! days". INCn is INC whose task length is n seconds of CPU (Sec. 4.1: "INC
//! can be straightforwardly configured so that its running time completes
//! in a specified task length"; the paper found c = 1.46 billion increments
//! per second on its Core i7 870). On another machine the paper's INC128 is
//! INC sized to 128 s of CPU *there*: that is how ttp scales it, with the
//! loop count derived from this machine's measured speed.
use serde::{Deserialize, Serialize};

/// Step 1 of the paper: runs and task length (s) of INC128.
pub const PAPER_SHORT: (u32, f64) = (800, 128.0);
/// Step 7 of the paper: runs and task length (s) of INC16384.
pub const PAPER_LONG: (u32, f64) = (40, 16_384.0);
/// `calibrate --quick`: the paper's counts at this share of its task
/// lengths (INC128 → 0.125 s, INC16384 → 16 s).
pub const QUICK_SCALE: f64 = 1.0 / 1024.0;

/// One calibration run set: Step 1 (short) or Step 7 (long).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// 1 or 7.
    pub step: u8,
    /// Measured runs asked for (after one warm-up run).
    pub runs: u32,
    /// The program: `INCn` or the command given.
    pub program: String,
    /// CPU seconds of one run of INC (absent for a command given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_seconds: Option<f64>,
    /// INC's outer iterations for that task length on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loops: Option<u64>,
    /// The paper's runs and task length for this step.
    pub paper_runs: u32,
    pub paper_task_seconds: f64,
    /// Measured runs completed (less than `runs` after Ctrl-C).
    #[serde(default)]
    pub completed_runs: u32,
    /// Wall-clock seconds the step took.
    #[serde(default)]
    pub elapsed_s: f64,
}

/// The calibration's procedure, stored in the profile and stated in the
/// output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Procedure {
    pub phases: Vec<Phase>,
    /// CPU ns of one INC outer iteration on this machine, and its
    /// increments (`ttp-ebpf inc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_cpu_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_increments: Option<u64>,
    /// Task lengths as a share of the paper's when every step ran INC at
    /// one common share of them (1 = the paper's procedure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
    /// CPU seconds the runs take at least (warm-ups included).
    pub estimated_cpu_s: f64,
}

/// `INC128`, `INC0.125`.
pub(crate) fn inc_name(seconds: f64) -> String {
    if seconds.fract() == 0.0 {
        format!("INC{}", seconds as u64)
    } else {
        format!("INC{seconds}")
    }
}

/// Hours (or minutes, days) in words.
pub(crate) fn duration_words(s: f64) -> String {
    if s >= 2.0 * 86_400.0 {
        format!("{:.1} h ({:.1} days)", s / 3600.0, s / 86_400.0)
    } else if s >= 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 60.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{s:.1} s")
    }
}

impl Phase {
    /// Step `step` of INC at `task_seconds` (`loops` iterations here).
    pub fn inc(step: u8, runs: u32, task_seconds: f64, loops: u64) -> Phase {
        let (paper_runs, paper_task_seconds) = if step == 7 { PAPER_LONG } else { PAPER_SHORT };
        Phase {
            step,
            runs,
            program: inc_name(task_seconds),
            task_seconds: Some(task_seconds),
            loops: Some(loops),
            paper_runs,
            paper_task_seconds,
            completed_runs: 0,
            elapsed_s: 0.0,
        }
    }

    /// Step `step` of a command the user gave.
    pub fn command(step: u8, runs: u32, command: &[String]) -> Phase {
        let (paper_runs, paper_task_seconds) = if step == 7 { PAPER_LONG } else { PAPER_SHORT };
        Phase {
            step,
            runs,
            program: command.join(" "),
            task_seconds: None,
            loops: None,
            paper_runs,
            paper_task_seconds,
            completed_runs: 0,
            elapsed_s: 0.0,
        }
    }

    fn as_paper(&self) -> bool {
        self.runs == self.paper_runs && self.task_seconds == Some(self.paper_task_seconds)
    }

    fn words(&self) -> String {
        let paper = format!(
            "the paper's {} × {}",
            self.paper_runs,
            inc_name(self.paper_task_seconds)
        );
        match (self.task_seconds, self.loops) {
            (Some(t), Some(l)) => format!(
                "Step {}: {} runs of {} ({t} s of CPU each, {l} INC iterations on this machine){}",
                self.step,
                self.runs,
                self.program,
                if self.as_paper() {
                    " as the paper".to_string()
                } else {
                    format!(" in place of {paper}")
                }
            ),
            _ => format!(
                "Step {}: {} runs of `{}` in place of {paper}",
                self.step, self.runs, self.program
            ),
        }
    }
}

impl Procedure {
    pub fn new(phases: Vec<Phase>, iteration: Option<(u64, u64)>) -> Procedure {
        let estimated_cpu_s = phases
            .iter()
            .filter_map(|p| p.task_seconds.map(|t| f64::from(p.runs + 1) * t))
            .sum();
        let shares: Vec<Option<f64>> = phases
            .iter()
            .map(|p| p.task_seconds.map(|t| t / p.paper_task_seconds))
            .collect();
        let paper_counts = phases.iter().all(|p| p.runs == p.paper_runs);
        let scale = match shares.first() {
            Some(Some(s))
                if paper_counts && shares.iter().all(|x| *x == Some(*s)) && phases.len() == 2 =>
            {
                Some(*s)
            }
            _ => None,
        };
        Procedure {
            phases,
            iteration_cpu_ns: iteration.map(|i| i.0),
            iteration_increments: iteration.map(|i| i.1),
            scale,
            estimated_cpu_s,
        }
    }

    /// The lines the output carries: what runs, how it relates to the
    /// paper's procedure, and how long it takes.
    pub fn statement(&self) -> String {
        let mut s = String::from(
            "EMP calibration (Sec. 4.5.1; the paper: Step 1 800 × INC128, over 28 hours, and Step 7 40 × INC16384, about 180 hours; INCn = n s of CPU, sized here to this machine's speed",
        );
        if let (Some(ns), Some(inc)) = (self.iteration_cpu_ns, self.iteration_increments) {
            s += &format!(
                ": one iteration of {inc} increments = {:.3} ms of CPU",
                ns as f64 / 1e6
            );
        }
        s += ")\n";
        for p in &self.phases {
            s += &format!("  {}\n", p.words());
        }
        match self.scale {
            Some(1.0) => s += "  this is the paper's procedure\n",
            Some(x) => {
                s += &format!(
                    "  the paper's procedure at 1/{:.0} of its task lengths\n",
                    1.0 / x
                )
            }
            None if self.phases.iter().all(|p| p.step == 1) => {
                s += "  Step 7 (the long calibration) not run: pair one later with `calibrate --pair`\n"
            }
            None => {}
        }
        if self.estimated_cpu_s > 0.0 {
            s += &format!(
                "  at least {} of CPU for INC's runs (warm-ups included)\n",
                duration_words(self.estimated_cpu_s)
            );
        }
        let done: Vec<String> = self
            .phases
            .iter()
            .filter(|p| p.elapsed_s > 0.0)
            .map(|p| {
                format!(
                    "Step {} took {} for {} of {} runs",
                    p.step,
                    duration_words(p.elapsed_s),
                    p.completed_runs,
                    p.runs
                )
            })
            .collect();
        if !done.is_empty() {
            s += &format!("  {}\n", done.join("; "));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default is the paper's procedure (800 × INC128 + 40 × INC16384,
    /// 210.6 h of CPU with the warm-ups) and says so; --quick is that at
    /// 1/1024; other counts are named as departures. Catches a default that
    /// is not the paper's, a wrong time estimate, and a scaled calibration
    /// presented as the paper's.
    #[test]
    fn the_paper_procedure_is_recognised_and_timed() {
        let paper = Procedure::new(
            vec![
                Phase::inc(1, 800, 128.0, 15_000),
                Phase::inc(7, 40, 16_384.0, 1_920_000),
            ],
            Some((8_533_000, 1 << 20)),
        );
        assert_eq!(paper.scale, Some(1.0));
        // 801 × 128 + 41 × 16384 s.
        assert_eq!(paper.estimated_cpu_s, 801.0 * 128.0 + 41.0 * 16_384.0);
        let s = paper.statement();
        assert!(s.contains("this is the paper's procedure"), "{s}");
        assert!(s.contains("Step 1: 800 runs of INC128"), "{s}");
        assert!(s.contains("Step 7: 40 runs of INC16384"), "{s}");
        assert!(s.contains("215.1 h (9.0 days)"), "{s}");
        let quick = Procedure::new(
            vec![
                Phase::inc(1, 800, 128.0 * QUICK_SCALE, 15),
                Phase::inc(7, 40, 16_384.0 * QUICK_SCALE, 1_920),
            ],
            None,
        );
        assert_eq!(quick.scale, Some(QUICK_SCALE));
        let s = quick.statement();
        assert!(s.contains("at 1/1024 of its task lengths"), "{s}");
        assert!(s.contains("INC0.125"), "{s}");
        let own = Procedure::new(vec![Phase::inc(1, 8, 0.05, 6)], None);
        assert_eq!(own.scale, None);
        let s = own.statement();
        assert!(s.contains("in place of the paper's 800 × INC128"), "{s}");
        assert!(s.contains("Step 7 (the long calibration) not run"), "{s}");
    }
}
