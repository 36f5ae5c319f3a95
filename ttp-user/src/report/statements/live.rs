//! `statements --live`: every second, the groups of the last second on a
//! cleared terminal (a `top`-like view); the final report covers the whole
//! window as without it.
use ttp_statements::Group;

/// Shows one screen of `--live` on standard output, clearing the terminal
/// first.
pub(crate) fn show(groups: &[Group], statements: u64, top: usize, secs: f64) {
    print!("\x1b[2J\x1b[H{}", text(groups, statements, top, secs));
}

/// One screen of `--live`: calls per second and time per call of the
/// groups of the last interval.
pub fn text(groups: &[Group], statements: u64, top: usize, secs: f64) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "ttp statements --live: {statements} statements in the last {secs:.1} s (Ctrl-C ends and prints the whole window)"
    );
    let _ = writeln!(
        o,
        "{:>9} {:>10} {:>10} {:>10} {:>10}  statement",
        "calls/s", "ms/call", "on-CPU", "runq", "iowait"
    );
    for g in groups.iter().take(top) {
        let per = |v: u64| v as f64 / 1e6 / g.calls.max(1) as f64;
        let mut key = g.key.clone();
        if key.len() > 70 {
            let mut cut = 67;
            while !key.is_char_boundary(cut) {
                cut -= 1;
            }
            key.truncate(cut);
            key.push_str("...");
        }
        let _ = writeln!(
            o,
            "{:>9.1} {:>10.3} {:>10.3} {:>10.3} {:>10.3}  {key}",
            g.calls as f64 / secs,
            per(g.elapsed_ns),
            per(g.on_cpu_ns),
            per(g.runq_wait_ns),
            per(g.iowait_ns),
        );
    }
    o
}
