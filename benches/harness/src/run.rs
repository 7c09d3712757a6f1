//! Rounds interleaved across allocators: every round runs every workload under every runner once,
//! the runners' order rotated by round and workload, so that a slow spell of the machine falls on
//! all of them alike.

use std::time::Instant;

/// Calls `run(round, workload, runner)` for `rounds` rounds of `workloads` × `runners`, and after
/// each call prints a progress line: `[done/total elapsed] round R` followed by what `run` returned.
pub fn interleaved(
    rounds: usize,
    workloads: usize,
    runners: usize,
    mut run: impl FnMut(usize, usize, usize) -> String,
) {
    let total = rounds * workloads * runners;
    let mut done = 0;
    let started = Instant::now();
    for round in 0..rounds {
        for wi in 0..workloads {
            for k in 0..runners {
                let ai = (k + round + wi) % runners; // rotate the order
                let line = run(round, wi, ai);
                done += 1;
                eprintln!(
                    "[{done}/{total} {:>5.0}s] round {} {line}",
                    started.elapsed().as_secs_f64(),
                    round + 1,
                );
            }
        }
    }
}
