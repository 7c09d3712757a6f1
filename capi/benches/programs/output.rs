//! The report's output: `programs.md` (the tables) and `programs.png` (the chart of ratios).

use super::{Cell, Kind, NAMES, Workload};
use crate::harness::chart::{Names, RatioBars};
use crate::harness::stats::{geomean, median, mib};
use crate::harness::table::{header, row};
use std::fmt::Write as _;
use std::path::Path;

/// (time ratio, RSS ratio) of poolalloc to the best of jemalloc and mimalloc; for redis the time
/// ratio is the time per request, best peer's requests/s over poolalloc's.
pub fn ratios(w: &Workload, c: &[Cell]) -> (f64, f64) {
    let f: Vec<f64> = c.iter().map(|c| median(c.figures.clone())).collect();
    let m: Vec<f64> = c.iter().map(|c| median(c.rss.clone())).collect();
    let t = if w.kind == Kind::Redis {
        f[2].max(f[3]) / f[0]
    } else {
        f[0] / f[2].min(f[3])
    };
    (t, m[0] / m[2].min(m[3]))
}

/// The report: the environment, the table of figures and RSS, CPU times, redis's tests, and the
/// geometric means of the ratios.
pub fn table(
    workloads: &[&Workload],
    cells: &[Vec<Cell>],
    rounds: usize,
    quick: bool,
    env: &str,
) -> String {
    let mut s = String::new();
    s += "# Real programs under each allocator\n\n";
    s += env;
    let _ = writeln!(
        s,
        "\n`cargo bench -p poolalloc-c --bench programs{}`: medians of {rounds} interleaved run(s) per cell{}. \
         Time in seconds (redis: requests per second, geometric mean over its tests), peak RSS in MiB \
         (redis: the server's VmHWM; others: wait4's ru_maxrss, child processes included). \
         Ratio = poolalloc / best of jemalloc and mimalloc, for redis best requests/s / poolalloc's \
         (below 1 is better). Every program printed the same output under every allocator.\n",
        if quick { " -- --quick" } else { "" },
        if quick {
            ", quick mode (small inputs)"
        } else {
            ""
        }
    );
    let rss = NAMES.map(|n| format!("{n} RSS"));
    let rss: Vec<&str> = rss.iter().map(String::as_str).collect();
    s += &header(
        &[
            &["program"][..],
            &NAMES,
            &["time ratio"],
            &rss,
            &["RSS ratio"],
        ]
        .concat(),
    );
    for (wi, w) in workloads.iter().enumerate() {
        let c = &cells[wi];
        let f: Vec<f64> = c.iter().map(|c| median(c.figures.clone())).collect();
        let m: Vec<f64> = c.iter().map(|c| median(c.rss.clone())).collect();
        let (tr, mr) = ratios(w, c);
        let fig = |x: f64| {
            if w.kind == Kind::Redis {
                format!("{x:.0} req/s")
            } else {
                format!("{x:.3} s")
            }
        };
        s += &row(&[
            w.name.to_string(),
            fig(f[0]),
            fig(f[1]),
            fig(f[2]),
            fig(f[3]),
            format!("**{tr:.2}**"),
            mib(m[0]),
            mib(m[1]),
            mib(m[2]),
            mib(m[3]),
            format!("**{mr:.2}**"),
        ]);
    }
    let timed: Vec<usize> = (0..workloads.len())
        .filter(|&wi| workloads[wi].kind != Kind::Redis)
        .collect();
    if !timed.is_empty() {
        s += "\nCPU time (user + system seconds, child processes included; less disturbed than the wall \
              time by other work on the machine):\n\n";
        s += &header(&[&["program"][..], &NAMES, &["CPU ratio"]].concat());
        for wi in timed {
            let c: Vec<f64> = cells[wi].iter().map(|c| median(c.cpu.clone())).collect();
            s += &row(&[
                workloads[wi].name.to_string(),
                format!("{:.3}", c[0]),
                format!("{:.3}", c[1]),
                format!("{:.3}", c[2]),
                format!("{:.3}", c[3]),
                format!("**{:.2}**", c[0] / c[2].min(c[3])),
            ]);
        }
    }
    if let Some(wi) = workloads.iter().position(|w| w.kind == Kind::Redis) {
        s += "\nredis-benchmark, requests per second per test (medians; value size, pipeline depth):\n\n";
        s += &header(&[&["test"][..], &NAMES, &["ratio"]].concat());
        let names: Vec<String> = cells[wi][0].tests[0].iter().map(|t| t.0.clone()).collect();
        for (ti, name) in names.iter().enumerate() {
            let v: Vec<f64> = cells[wi]
                .iter()
                .map(|c| {
                    median(
                        c.tests
                            .iter()
                            .map(|t| {
                                assert_eq!(&t[ti].0, name, "redis-benchmark changed its tests");
                                t[ti].1
                            })
                            .collect(),
                    )
                })
                .collect();
            s += &row(&[
                name.clone(),
                format!("{:.0}", v[0]),
                format!("{:.0}", v[1]),
                format!("{:.0}", v[2]),
                format!("{:.0}", v[3]),
                format!("{:.2}", v[2].max(v[3]) / v[0]),
            ]);
        }
    }
    let (t, m): (Vec<f64>, Vec<f64>) = workloads
        .iter()
        .enumerate()
        .map(|(wi, w)| ratios(w, &cells[wi]))
        .unzip();
    let _ = writeln!(
        s,
        "\nGeometric mean of the time ratios **{:.2}**, of the RSS ratios **{:.2}**; worst time ratio {:.2}, worst RSS ratio {:.2} (target: every ratio at most 1.00).",
        geomean(&t),
        geomean(&m),
        t.iter().cloned().fold(0.0, f64::max),
        m.iter().cloned().fold(0.0, f64::max)
    );
    s
}

/// `programs.png`: poolalloc's time and peak RSS ratios per program.
pub fn chart(png: &Path, workloads: &[&Workload], cells: &[Vec<Cell>]) {
    let ratios: Vec<(f64, f64)> = workloads
        .iter()
        .enumerate()
        .map(|(wi, w)| ratios(w, &cells[wi]))
        .collect();
    let names: Vec<&str> = workloads.iter().map(|w| w.name).collect();
    RatioBars {
        caption: "Programs: poolalloc / best of jemalloc and mimalloc (below 1 is better)",
        time_label: "time (redis: time per request)",
        names_height: 40,
        names_style: Names::Level,
        names: &names,
        ratios: &ratios,
    }
    .draw(plotters::prelude::BitMapBackend::new(png, (900, 480)))
    .unwrap();
}
