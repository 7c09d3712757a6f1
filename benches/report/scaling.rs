//! The threaded workloads at several thread counts (issue 33, item 3): `cargo bench --bench report
//! -- --threads=1,2,4,8,16 [names]` runs each named workload (by default the threaded ones:
//! [`THREADED`]) under poolalloc and the peers at each count, rounds interleaved as in the main
//! table (the hardened build is left out: it is the main table's column), and writes a table of
//! throughput per thread count to stdout and `target/poolalloc-report/scaling.md`.
//!
//! Throughput: the workload's operations per second where its work grows with the threads
//! (`Extra::work`: larson, xmalloc-test, local-churn, threads), requests per second for a service, and runs
//! per second where the work is fixed and only shared out (the rayon workloads). Each row also gives
//! poolalloc over the best peer (above 1 is better; the target is ≥ 0.90 at every count)
//! and marks a count where poolalloc's throughput falls from the count before while the best
//! peer's rises (the other target: there must be none).

use super::{ALLOCATORS, PEERS, Run, WORKLOADS, run_child, write_json_input};
use crate::harness::cargo::report_dir;
use crate::harness::run::interleaved;
use crate::harness::stats::median;
use crate::harness::table::{header, row};

/// The workloads that take a thread count (`Params::threads`): those that move blocks between
/// threads, and local-churn, whose threads share nothing (issue 46).
pub const THREADED: &[&str] = &[
    "larson",
    "xmalloc-test",
    "local-churn",
    "threads",
    "rayon-drop",
    "rayon-reduce",
    "http-service",
];

/// The counts of `--threads=1,2,4,8,16`, if given.
pub fn thread_counts(args: &[String]) -> Option<Vec<usize>> {
    let list = args.iter().find_map(|a| a.strip_prefix("--threads="))?;
    let counts: Vec<usize> = list
        .split(',')
        .map(|n| n.trim().parse().expect("--threads=N,M,...: numbers"))
        .collect();
    assert!(
        !counts.is_empty() && counts.iter().all(|&n| n > 0),
        "--threads needs thread counts above 0"
    );
    Some(counts)
}

/// One run's throughput (see the file's doc) and its unit.
fn throughput(r: &Run) -> (f64, &'static str) {
    if let Some(rps) = r.ops_per_sec {
        (rps / 1e3, "k requests/s")
    } else if let Some(w) = r.work {
        (w / r.secs / 1e6, "M operations/s")
    } else {
        (1.0 / r.secs, "runs/s")
    }
}

pub fn run(counts: &[usize], only: &[&String], rounds: usize, scale: usize) {
    let exe = std::env::current_exe().unwrap();
    let json = write_json_input();
    let names: Vec<&str> = WORKLOADS
        .iter()
        .map(|w| w.0)
        .filter(|n| {
            if only.is_empty() {
                THREADED.contains(n)
            } else {
                only.iter().any(|o| n.contains(o.as_str()))
            }
        })
        .collect();
    // Cells: one (workload, thread count) pair each, every allocator, interleaved.
    let cells: Vec<(&str, usize)> = names
        .iter()
        .flat_map(|&n| counts.iter().map(move |&t| (n, t)))
        .collect();
    let mut runs: Vec<Vec<Vec<Run>>> = vec![vec![Vec::new(); ALLOCATORS.len()]; cells.len()];
    interleaved(rounds, cells.len(), ALLOCATORS.len(), |_round, ci, ai| {
        let (w, threads) = cells[ci];
        let run = run_child(
            &exe,
            w,
            &json,
            ALLOCATORS[ai],
            threads,
            scale,
            ALLOCATORS[ai],
        );
        let (x, unit) = throughput(&run);
        let line = format!(
            "{w:<17} {threads:>3} threads {:<11} {x:>9.3} {unit}",
            ALLOCATORS[ai]
        );
        runs[ci][ai].push(run);
        line
    });
    let report = table(&names, counts, &runs, rounds, scale);
    println!("{report}");
    let dir = report_dir();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("scaling.md"), &report).unwrap();
    eprintln!("wrote {}", dir.join("scaling.md").display());
}

/// The Markdown tables, one per workload: medians of throughput per thread count and allocator.
fn table(
    names: &[&str],
    counts: &[usize],
    runs: &[Vec<Vec<Run>>],
    rounds: usize,
    scale: usize,
) -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut s = format!(
        "Throughput per thread count, medians of {rounds} interleaved run(s) per cell, scale \
         {scale}, on {cpus} CPU(s). vs best peer = poolalloc / best of the peers' throughput \
         (above 1 is better); ↓ marks a count where poolalloc's throughput fell from the count \
         before while the best peer's rose.\n"
    );
    for (wi, w) in names.iter().enumerate() {
        let cells = &runs[wi * counts.len()..(wi + 1) * counts.len()];
        let unit = throughput(&cells[0][0][0]).1;
        s += &format!("\n**{w}** ({unit})\n\n");
        let columns: Vec<String> = std::iter::once("threads".to_string())
            .chain(ALLOCATORS.iter().map(|a| a.to_string()))
            .chain(["vs best peer".to_string()])
            .collect();
        s += &header(&columns);
        let mut last: Option<(f64, f64)> = None;
        for (ti, &t) in counts.iter().enumerate() {
            let x: Vec<f64> = cells[ti]
                .iter()
                .map(|r| median(r.iter().map(|r| throughput(r).0).collect()))
                .collect();
            let best = PEERS.map(|a| x[a]).fold(0.0, f64::max);
            let fell = last.is_some_and(|(p, b)| x[0] < p && best > b);
            last = Some((x[0], best));
            let cells: Vec<String> = std::iter::once(t.to_string())
                .chain(x.iter().map(|v| format!("{v:.3}")))
                .chain([format!(
                    "**{:.2}**{}",
                    x[0] / best,
                    if fell { " ↓" } else { "" }
                )])
                .collect();
            s += &row(&cells);
        }
    }
    s
}
