//! rayon-reduce: a `rayon` map-reduce, word frequencies over real Rust sources (the registry's, as
//! in syn-parse). Each worker folds the words of the files it takes into a `HashMap<String,
//! usize>` of its own; `reduce` then merges the maps pairwise on whichever worker runs the merge,
//! which drops the absorbed map, its table and its duplicate keys, all allocated by another
//! worker; the final map is dropped by the main thread, which made none of it. This is where
//! rayon-drop (results collected, then dropped by one plain thread) differs: here every worker
//! frees what others made, in the middle of the job.

use super::crates::rayon_setup;
use super::{Extra, Params};
use rayon::prelude::*;
use std::collections::HashMap;

pub(super) fn rayon_reduce(p: Params) -> Extra {
    let (sources, setup, pool) = rayon_setup(p);
    for _ in 0..6 {
        let counts: HashMap<String, usize> = pool.install(|| {
            sources
                .par_iter()
                .fold(HashMap::new, |mut m: HashMap<String, usize>, s| {
                    for w in s.split(|c: char| !c.is_alphanumeric() && c != '_') {
                        if !w.is_empty() {
                            *m.entry(w.to_string()).or_insert(0) += 1;
                        }
                    }
                    m
                })
                .reduce(HashMap::new, |a, b| {
                    // Into the larger map, as a careful program merges.
                    let (mut big, small) = if a.len() >= b.len() { (a, b) } else { (b, a) };
                    for (w, n) in small {
                        *big.entry(w).or_insert(0) += n;
                    }
                    big
                })
        });
        // `fn`, `let` and `self` are in every Rust file: the merge must have kept every count.
        assert!(counts.get("fn").copied().unwrap_or(0) >= sources.len() / 2);
        std::hint::black_box(counts);
    }
    Extra {
        setup,
        ..Extra::default()
    }
}
