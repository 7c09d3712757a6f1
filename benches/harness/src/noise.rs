//! How far a figure of a report can be trusted, and when a difference is called one.
//!
//! A cell of a report is one workload under one runner, measured once per round; the rounds are
//! interleaved across runners ([`crate::run`]), so the runs of one round were made side by side,
//! minutes apart at most. The figures here:
//!
//! - a cell's [`Spread`]: the median of its per-round values, and their lowest and highest;
//! - a ratio's [`Spread`]: the per-round ratios of two cells ([`paired`], this round's run of one
//!   runner over this round's run of the other), their median, lowest and highest. Pairing by
//!   round takes out what a slow spell of the machine does to both runners alike;
//! - a ratio's [`Verdict`], by one rule ([`verdict`]): **slower** when every round's ratio is above
//!   `1 + MARGIN`, **faster** when every round's ratio is below `1 / (1 + MARGIN)`, **level** (within
//!   noise) otherwise, and always level with fewer than [`MIN_ROUNDS`] rounds. Three rounds on the
//!   same side by chance alone happen one time in four without a margin. The margin is wider than
//!   the rounds' own spread because a run has noise of its own that its rounds share: two quiet
//!   quick runs of one build (2026-12-04) put rayon-reduce against the baseline at 1.12–1.13 in
//!   every round of one and 0.95–1.03 in the other. With a 5% margin those two runs flagged 5 and 3
//!   workloads against the baseline, only xmalloc-test in both; with 10%, 2 and 1 (xmalloc-test
//!   both times). A 20% difference still shows.

/// The least a ratio must differ from 1 in every round to be flagged (10%).
pub const MARGIN: f64 = 0.10;

/// The fewest rounds on which a ratio is flagged at all; with fewer, every ratio is level.
pub const MIN_ROUNDS: usize = 3;

/// The median, lowest and highest of a set of per-round values; all three NaN for none (a runner
/// with no result, such as a workload newer than the baseline).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `v` (NaN values are left out).
    pub fn of(v: &[f64]) -> Spread {
        let v: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return Spread {
                median: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
            };
        }
        Spread {
            median: crate::stats::median(v.clone()),
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }

    /// Half the range over the median: the `±` of a time (0.04 for ±4%).
    pub fn half_range(&self) -> f64 {
        (self.max - self.min) / 2.0 / self.median
    }

    /// A time: `0.123 ±4%` (seconds, three decimals), or a dash for none.
    pub fn time(&self) -> String {
        if self.median.is_nan() {
            return "–".to_string();
        }
        format!("{:.3} ±{:.0}%", self.median, self.half_range() * 100.0)
    }

    /// A ratio: `1.04 (0.98–1.10)`, the median in bold, or a dash for none.
    pub fn ratio(&self) -> String {
        if self.median.is_nan() {
            return "–".to_string();
        }
        format!("**{:.2}** ({:.2}–{:.2})", self.median, self.min, self.max)
    }
}

/// The per-round ratios `a[i] / b[i]` of two runners' per-round values, for the rounds both have.
pub fn paired(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x / y).collect()
}

/// A ratio of two runners' cells: the per-round ratios, their spread and the verdict on them.
#[derive(Clone, Debug)]
pub struct Ratio {
    pub rounds: Vec<f64>,
    pub spread: Spread,
    pub verdict: Verdict,
}

impl Ratio {
    /// The ratio of `a`'s per-round values to `b`'s, paired by round ([`paired`]).
    pub fn of(a: &[f64], b: &[f64]) -> Ratio {
        let rounds = paired(a, b);
        Ratio {
            spread: Spread::of(&rounds),
            verdict: verdict(&rounds),
            rounds,
        }
    }

    /// The ratio and its range, then the verdict: `**1.24** (1.18–1.31) slower`.
    pub fn judged(&self) -> String {
        if self.spread.median.is_nan() {
            return "–".to_string();
        }
        format!("{} {}", self.spread.ratio(), self.verdict.word())
    }
}

/// What a ratio (a time of ours over another's) says, by the rule of this module's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every round's ratio above `1 + MARGIN`.
    Slower,
    /// Every round's ratio below `1 / (1 + MARGIN)`.
    Faster,
    /// Neither: the difference, if any, is within the noise of these rounds.
    Level,
}

impl Verdict {
    /// The word the tables and the JSON print.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Slower => "slower",
            Verdict::Faster => "faster",
            Verdict::Level => "level",
        }
    }
}

/// The verdict on the per-round ratios `ratios` (NaN values, rounds without a pair, are left out).
pub fn verdict(ratios: &[f64]) -> Verdict {
    let r: Vec<f64> = ratios.iter().copied().filter(|x| !x.is_nan()).collect();
    if r.len() < MIN_ROUNDS {
        Verdict::Level
    } else if r.iter().all(|&x| x > 1.0 + MARGIN) {
        Verdict::Slower
    } else if r.iter().all(|&x| x < 1.0 / (1.0 + MARGIN)) {
        Verdict::Faster
    } else {
        Verdict::Level
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_rounds() {
        let s = Spread::of(&[0.30, 0.10, 0.20]);
        assert_eq!((s.median, s.min, s.max), (0.20, 0.10, 0.30));
        assert!((s.half_range() - 0.5).abs() < 1e-12);
        assert_eq!(s.time(), "0.200 ±50%");
        assert_eq!(Spread::of(&[1.0, 1.1]).ratio(), "**1.05** (1.00–1.10)");
        let none = Spread::of(&[]);
        assert!(none.median.is_nan() && none.min.is_nan() && none.max.is_nan());
        assert_eq!(none.time(), "–");
        assert_eq!(none.ratio(), "–");
        // A NaN (no result that round) is left out, not propagated.
        assert_eq!(Spread::of(&[f64::NAN, 2.0]).median, 2.0);
    }

    #[test]
    fn paired_by_round() {
        assert_eq!(paired(&[2.0, 3.0, 4.0], &[1.0, 3.0]), vec![2.0, 1.0]);
        // The pairs, not the medians: each round's pair ran side by side.
        let r = Ratio::of(&[1.2, 2.4, 0.6], &[1.0, 2.0, 0.5]);
        assert_eq!(r.verdict, Verdict::Slower);
        assert!((r.spread.min - 1.2).abs() < 1e-12 && (r.spread.max - 1.2).abs() < 1e-12);
        assert_eq!(r.judged(), "**1.20** (1.20–1.20) slower");
        assert_eq!(Ratio::of(&[], &[]).judged(), "–");
    }

    #[test]
    fn flagged_only_when_every_round_agrees_beyond_the_margin() {
        // A planted 20% slowdown with a few percent of noise: every round above 1.10.
        assert_eq!(verdict(&[1.22, 1.17, 1.19]), Verdict::Slower);
        assert_eq!(verdict(&[0.80, 0.85, 0.88, 0.90]), Verdict::Faster);
        // One round on the other side, or within the margin: level.
        assert_eq!(verdict(&[1.30, 1.25, 0.99]), Verdict::Level);
        assert_eq!(verdict(&[1.20, 1.08, 1.30]), Verdict::Level);
        assert_eq!(verdict(&[0.80, 0.92, 0.80]), Verdict::Level);
        // rayon-reduce against the baseline in quiet quick runs of 2026-12-04: one run's rounds
        // all beyond the margin (the next run of the same binaries: 0.95-1.03), and the same
        // shape just inside it.
        assert_eq!(verdict(&[1.12, 1.13, 1.12]), Verdict::Slower);
        assert_eq!(verdict(&[1.08, 1.09, 1.08]), Verdict::Level);
        // frag-free-all's 2.24 of 2026-12-04, one round: never flagged on fewer than 3 rounds.
        assert_eq!(verdict(&[2.24]), Verdict::Level);
        assert_eq!(verdict(&[2.24, 2.0]), Verdict::Level);
        // Rounds without a pair do not count.
        assert_eq!(verdict(&[1.5, 1.5, f64::NAN]), Verdict::Level);
        assert_eq!(verdict(&[]), Verdict::Level);
    }

    #[test]
    fn the_margin_is_symmetric_in_log() {
        // 1.11 is flagged slower; its inverse, 0.901, faster.
        assert_eq!(verdict(&[1.11; 3]), Verdict::Slower);
        assert_eq!(verdict(&[1.0 / 1.11; 3]), Verdict::Faster);
        assert_eq!(verdict(&[1.0 / 1.09; 3]), Verdict::Level);
    }
}
