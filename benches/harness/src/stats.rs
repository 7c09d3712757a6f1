//! The figures the reports give: medians of the rounds, geometric means of ratios, MiB.

/// The median of `v` (the mean of the two middle values for an even count); `v` is not empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        // A runner with no result (a workload newer than the report's baseline).
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The geometric mean of `v` (positive values; NaN for an empty `v`).
pub fn geomean(v: &[f64]) -> f64 {
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
}

/// `b` bytes in MiB, one decimal.
pub fn mib(b: f64) -> String {
    format!("{:.1}", b / 1048576.0)
}
