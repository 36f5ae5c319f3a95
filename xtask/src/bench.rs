//! Benchmarks. Each prints its figures and the exact command behind them;
//! docs/benchmarks.md records them.
use clap::Subcommand;

#[derive(Subcommand)]
pub enum Which {
    /// Cost of `attach --all` on a context-switch-heavy load: pinned
    /// `perf bench sched pipe` with and without ttp, interleaved rounds.
    Overhead {
        /// Interleaved rounds (each: one run without, one with ttp).
        #[arg(long, default_value_t = 7)]
        rounds: u32,
    },
}

pub fn run(which: Which) -> anyhow::Result<()> {
    match which {
        Which::Overhead { rounds } => {
            anyhow::bail!("overhead benchmark with {rounds} rounds: not built yet")
        }
    }
}
