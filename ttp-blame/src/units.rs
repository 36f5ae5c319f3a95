//! Times as people read them.

/// A duration in ns, for people: `1.20 s`, `12.3 ms`, `45 µs`.
pub fn fmt_ns(ns: f64) -> String {
    // −0.0 (an empty f64 sum) prints as 0.
    let ns = if ns == 0.0 { 0.0 } else { ns };
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.0} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}
