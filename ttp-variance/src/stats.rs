//! Sample means and covariances of per-invocation durations.

/// Mean of each series and their sample covariance matrix (denominator
/// n − 1). All series have the same length n ≥ 2. Two passes (means first)
/// keep the products small: durations in ns squared reach 1e18.
pub(crate) fn covariance_matrix(series: &[Vec<f64>]) -> (Vec<f64>, Vec<Vec<f64>>) {
    let k = series.len();
    let n = series.first().map_or(0, Vec::len);
    let means: Vec<f64> = series
        .iter()
        .map(|s| s.iter().sum::<f64>() / n as f64)
        .collect();
    let mut cov = vec![vec![0.0; k]; k];
    for i in 0..k {
        for j in i..k {
            let c = series[i]
                .iter()
                .zip(&series[j])
                .map(|(a, b)| (a - means[i]) * (b - means[j]))
                .sum::<f64>()
                / (n as f64 - 1.0);
            cov[i][j] = c;
            cov[j][i] = c;
        }
    }
    (means, cov)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-computed: x = 1,2,3,4 (var 5/3), y = 2x (var 20/3, cov 10/3),
    /// z = 4,3,2,1 (cov(x,z) = −5/3). Catches a population denominator or a
    /// missing mean subtraction.
    #[test]
    fn matches_hand_computed_values() {
        let x = vec![1.0, 2.0, 3.0, 4.0];
        let y: Vec<f64> = x.iter().map(|v| 2.0 * v).collect();
        let z = vec![4.0, 3.0, 2.0, 1.0];
        let (m, c) = covariance_matrix(&[x, y, z]);
        assert_eq!(m, vec![2.5, 5.0, 2.5]);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(c[0][0], 5.0 / 3.0));
        assert!(close(c[1][1], 20.0 / 3.0));
        assert!(close(c[0][1], 10.0 / 3.0) && close(c[1][0], 10.0 / 3.0));
        assert!(close(c[0][2], -5.0 / 3.0));
    }
}
