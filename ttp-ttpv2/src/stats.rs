//! The few statistics the protocol uses: median (Sec. 8.5), mean, sample
//! standard deviation and relative error (Sec. 10, Table XV).
use serde::{Deserialize, Serialize};

/// Median; the mean of the two central values for an even count (Sec. 10:
/// "the median is the average of the two central times").
pub(crate) fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

pub(crate) fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample standard deviation (n − 1): Table XV's 46.2 ms for the eight
/// Time_calc values is this one (the population form gives 43.3).
pub(crate) fn sample_sd(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    Some((ss / (xs.len() - 1) as f64).sqrt())
}

/// Pearson's correlation coefficient; `None` when a variable is constant.
pub(crate) fn pearson(xs: &[f64], ys: &[f64]) -> Option<f64> {
    if xs.len() != ys.len() || xs.len() < 2 {
        return None;
    }
    let mx = mean(xs)?;
    let my = mean(ys)?;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (x, y) in xs.iter().zip(ys) {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx) * (x - mx);
        syy += (y - my) * (y - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// Location and spread of one measure over the retained QEs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sd: Option<f64>,
    /// sd / median (Sec. 10: ±46.2 ms of 1992.5 ms is ±2.3%), as a fraction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rel_error: Option<f64>,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    pub fn of(xs: &[f64]) -> Option<Summary> {
        let median = median(xs)?;
        let sd = sample_sd(xs);
        Some(Summary {
            n: xs.len(),
            median,
            mean: mean(xs)?,
            sd,
            rel_error: sd.filter(|_| median != 0.0).map(|s| s / median.abs()),
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches an even-count median that picks one central value.
    #[test]
    fn median_even_and_odd() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    /// Hand-computed: 2,4,4,4,5,5,7,9 has population sd 2 and sample sd
    /// sqrt(32/7). Catches dividing by n instead of n − 1.
    #[test]
    fn sample_sd_divides_by_n_minus_1() {
        let xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert!((sample_sd(&xs).unwrap() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(sample_sd(&[1.0]), None);
    }

    /// Catches a sign or normalisation error: a perfect line gives ±1, a
    /// constant gives no coefficient.
    #[test]
    fn pearson_extremes() {
        let x = [1.0, 2.0, 3.0, 4.0];
        assert!((pearson(&x, &[2.0, 4.0, 6.0, 8.0]).unwrap() - 1.0).abs() < 1e-12);
        assert!((pearson(&x, &[8.0, 6.0, 4.0, 2.0]).unwrap() + 1.0).abs() < 1e-12);
        assert_eq!(pearson(&x, &[1.0, 1.0, 1.0, 1.0]), None);
        // Hand-computed: x = 1,2,3 and y = 1,3,2 give r = 0.5.
        assert!((pearson(&[1.0, 2.0, 3.0], &[1.0, 3.0, 2.0]).unwrap() - 0.5).abs() < 1e-12);
    }
}
