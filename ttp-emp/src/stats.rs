//! Summary statistics of a set of times, as the paper's tables give them
//! (minimum, maximum, average, standard deviation, relative error).
use serde::{Deserialize, Serialize};

/// Statistics of `n` times in ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub min_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
    /// Experimental (sample, n − 1) standard deviation; `None` for n < 2.
    /// The paper does not say which it uses; it cites the VIM (JCGM 200), and
    /// the GUM (JCGM 100, 4.2.2) defines the experimental standard deviation
    /// with n − 1.
    pub sd_ns: Option<f64>,
    /// Relative error = sd / mean (Sec. 4.5.2, Table VII: 1,730.3 / 128,343
    /// = 1.3 × 10⁻²); `None` when sd is undefined or the mean is 0.
    pub rel_err: Option<f64>,
}

impl Summary {
    /// `None` for an empty set.
    pub fn of(values_ns: &[u64]) -> Option<Self> {
        let n = values_ns.len();
        if n == 0 {
            return None;
        }
        let mean = mean(values_ns.iter().map(|&v| v as f64));
        let sd = sample_sd(values_ns.iter().map(|&v| v as f64));
        Some(Self {
            n,
            min_ns: *values_ns.iter().min()?,
            max_ns: *values_ns.iter().max()?,
            mean_ns: mean,
            sd_ns: sd,
            rel_err: sd.filter(|_| mean != 0.0).map(|s| s / mean),
        })
    }
}

/// Arithmetic mean (0 for an empty set; callers check emptiness first).
pub(crate) fn mean(values: impl Iterator<Item = f64> + Clone) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// Sample standard deviation with n − 1 (two-pass, so large offsets such as
/// 10¹¹ ns do not cancel); `None` for fewer than two values.
pub(crate) fn sample_sd(values: impl Iterator<Item = f64> + Clone) -> Option<f64> {
    let n = values.clone().count();
    if n < 2 {
        return None;
    }
    let m = mean(values.clone());
    let ss: f64 = values.map(|v| (v - m) * (v - m)).sum();
    Some((ss / (n as f64 - 1.0)).sqrt())
}

/// Linear-interpolation quantile (Hyndman & Fan type 7) of sorted values.
pub(crate) fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// Median of unsorted values.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    quantile_sorted(&v, 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-computed: {2,4,4,4,5,5,7,9}: mean 5, Σ(x−5)² = 32, sd = √(32/7).
    /// Catches a population (n) divisor or a wrong relative error.
    #[test]
    fn summary_matches_hand_computation() {
        let s = Summary::of(&[2, 4, 4, 4, 5, 5, 7, 9]).unwrap();
        assert_eq!((s.n, s.min_ns, s.max_ns), (8, 2, 9));
        assert_eq!(s.mean_ns, 5.0);
        let sd = (32.0f64 / 7.0).sqrt();
        assert!((s.sd_ns.unwrap() - sd).abs() < 1e-12);
        assert!((s.rel_err.unwrap() - sd / 5.0).abs() < 1e-12);
    }

    /// Catches catastrophic cancellation on nanosecond values around 128 s.
    #[test]
    fn sd_is_exact_with_large_offsets() {
        let base = 128_250_000_000u64;
        let s = Summary::of(&[base - 1_000, base, base + 1_000]).unwrap();
        assert!((s.sd_ns.unwrap() - 1_000.0).abs() < 1e-6);
    }

    /// Catches an off-by-one in the interpolated quantile.
    #[test]
    fn quantile_type7() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&v, 0.25), Some(1.75));
        assert_eq!(quantile_sorted(&v, 0.75), Some(3.25));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    }
}
