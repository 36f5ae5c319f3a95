//! Human-readable numbers for terminal tables.

/// Nanoseconds as milliseconds with two decimals ("12.34").
pub(crate) fn ms(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

/// An integer with its thousands set apart by spaces ("12 345"), as the
/// text reports print counts.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// Bytes with a binary unit ("4.0 MiB").
pub(crate) fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches unit slips (ns shown as µs, KiB as KB).
    #[test]
    fn formats() {
        assert_eq!(ms(12_345_678), "12.35");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1 000");
        assert_eq!(grouped(100_003), "100 003");
        assert_eq!(grouped(12_345_678), "12 345 678");
        assert_eq!(bytes(4 * 1024 * 1024), "4.0 MiB");
    }
}
