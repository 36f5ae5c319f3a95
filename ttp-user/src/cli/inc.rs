//! `ttp-ebpf inc`: INC, the EMP paper's program under test (Fig. 7).
use std::path::PathBuf;

use clap::Args as ClapArgs;

use crate::report::format;
use ttp_emp::inc;

/// Run INC, the compute-bound program under test of the EMP paper (Fig. 7):
/// a nested loop that increments a counter, no I/O.
///
/// With --seconds, ttp first times single iterations on this machine (about
/// 0.1 s of CPU) and derives the loop count; it prints the count so that
/// repeated measurements can pass --loops and skip the calibration.
#[derive(Debug, ClapArgs)]
#[command(group(clap::ArgGroup::new("amount").required(true).args(["seconds", "loops"])))]
pub(crate) struct Args {
    /// Target CPU time of the loop, in seconds.
    #[arg(long, value_name = "N")]
    pub seconds: Option<f64>,
    /// Exact number of outer iterations (each 2^20 increments).
    #[arg(long, value_name = "C")]
    pub loops: Option<u64>,
    /// Write what was done as JSON (schema ttp.inc/1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (loops, cal, target) = match (args.seconds, args.loops) {
        (Some(s), _) => {
            if !(s.is_finite() && s > 0.0 && s <= 86_400.0) {
                return ttp_sys::error::usage(
                    "--seconds must be a number of seconds between 0 and 86400, e.g. --seconds 2",
                );
            }
            let cal = inc::calibrate();
            let loops = cal.loops_for(s);
            eprintln!(
                "INC calibration: one iteration ({} increments) = {:.3} ms of CPU (median of {}); {loops} iterations for {s} s",
                cal.inner,
                cal.outer_cpu_ns as f64 / 1e6,
                cal.samples
            );
            (loops, Some(cal), Some((s * 1e9) as u64))
        }
        (None, Some(0)) => return ttp_sys::error::usage("--loops must be at least 1"),
        (None, Some(c)) => (c, None, None),
        (None, None) => return ttp_sys::error::usage("give --seconds N or --loops C"),
    };
    let r = inc::run(loops, cal, target);
    let shown = crate::report::render::Inc(r);
    crate::report::render::print(&shown);
    let r = shown.0;
    if let Some(path) = &args.json {
        format::write_unannounced_file(path, &format::json::Json(&r))?;
    }
    Ok(())
}
