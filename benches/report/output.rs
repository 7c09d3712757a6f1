//! The report's output: the Markdown tables (times, peak RSS, ratios, the cost of hardening,
//! services' throughput and latency, fragmentation) and the charts (the ratios, and RSS over time
//! of the fragmentation workloads and the service).

use super::{ALLOCATORS, HARDENED, RUNNERS, Run, Workload, sampled};
use crate::harness::chart::{COLORS, Names, RatioBars, legend, register_font};
use crate::harness::stats::{geomean, median, mib};
use crate::harness::table::{header, row};

/// The Markdown table: medians per workload and allocator, and poolalloc's ratio to the best peer.
pub fn table(
    workloads: &[&(&str, Workload, bool)],
    runs: &[Vec<Vec<Run>>],
    threads: usize,
    rounds: usize,
    quick: bool,
) -> String {
    let mut s = String::new();
    s += &format!(
        "Medians of {rounds} interleaved run(s) per cell, {threads} threads{}. Time in seconds, peak RSS in MiB; \
         ratio = poolalloc / best of jemalloc and mimalloc (below 1 is better); hardened cost = poolalloc built with \
         `--features hardened` / poolalloc.\n\n",
        if quick {
            ", quick mode (small inputs)"
        } else {
            ""
        }
    );
    s += &header(&[
        "workload",
        "poolalloc s",
        "system s",
        "jemalloc s",
        "mimalloc s",
        "time ratio",
        "poolalloc RSS",
        "system RSS",
        "jemalloc RSS",
        "mimalloc RSS",
        "RSS ratio",
        "hardened s",
        "hardened cost",
    ]);
    for (wi, w) in workloads.iter().enumerate() {
        let t: Vec<f64> = (0..RUNNERS.len())
            .map(|a| median(runs[wi][a].iter().map(|r| r.secs).collect()))
            .collect();
        let m: Vec<f64> = (0..4)
            .map(|a| median(runs[wi][a].iter().map(|r| r.peak_rss as f64).collect()))
            .collect();
        s += &row(&[
            w.0.to_string(),
            format!("{:.3}", t[0]),
            format!("{:.3}", t[1]),
            format!("{:.3}", t[2]),
            format!("{:.3}", t[3]),
            format!("**{:.2}**", t[0] / t[2].min(t[3])),
            mib(m[0]),
            mib(m[1]),
            mib(m[2]),
            mib(m[3]),
            format!("**{:.2}**", m[0] / m[2].min(m[3])),
            format!("{:.3}", t[HARDENED]),
            format!("**{:.2}**", t[HARDENED] / t[0]),
        ]);
    }
    // Per workload: (time ratio, peak-RSS ratio, hardened cost), from the same medians as the table.
    let ratios: Vec<(f64, f64, f64)> = (0..workloads.len())
        .map(|wi| {
            let med = |a: usize, f: fn(&Run) -> f64| median(runs[wi][a].iter().map(f).collect());
            let t = |a: usize| med(a, |r| r.secs);
            let m = |a: usize| med(a, |r| r.peak_rss as f64);
            (
                t(0) / t(2).min(t(3)),
                m(0) / m(2).min(m(3)),
                t(HARDENED) / t(0),
            )
        })
        .collect();
    if !ratios.is_empty() {
        let pick = |f: fn(&(f64, f64, f64)) -> f64| ratios.iter().map(f).collect::<Vec<f64>>();
        let (time, rss, costs) = (pick(|r| r.0), pick(|r| r.1), pick(|r| r.2));
        let above = time.iter().filter(|&&r| r > 1.0).count();
        s += &format!(
            "\nTime ratio, geometric mean over the workloads: **{:.2}** (target: at most 0.90); above 1.00 on {above} of {} \
             (target: none). Peak-RSS ratio at most **{:.2}** (target: at most 1.10).\n",
            geomean(&time),
            time.len(),
            rss.iter().copied().fold(0.0, f64::max),
        );
        s += &format!(
            "\nHardened cost, geometric mean over the workloads: **{:.2}** (`hardened`, its default level; target: at most 1.10, never above 1.25).\n",
            geomean(&costs)
        );
    }
    s += &faults_table(workloads, runs);
    s += &service_table(workloads, runs);
    let frag: Vec<usize> = (0..workloads.len()).filter(|&i| workloads[i].2).collect();
    if !frag.is_empty() {
        s += "\nFragmentation: peak RSS / peak live requested bytes (lower is better), and RSS (MiB) right after \
              freeing everything / one second later, with no call to the allocator.\n\n";
        s += &header(&[
            "workload",
            "poolalloc",
            "system",
            "jemalloc",
            "mimalloc",
            "poolalloc after free",
            "system after free",
            "jemalloc after free",
            "mimalloc after free",
        ]);
        for wi in frag {
            let ratio = (0..4).map(|a| {
                let r = median(
                    runs[wi][a]
                        .iter()
                        .map(|r| r.peak_rss as f64 / r.peak_live.max(1) as f64)
                        .collect(),
                );
                format!("{r:.2}")
            });
            let after = (0..4).map(|a| {
                let f = median(runs[wi][a].iter().map(|r| r.rss_freed as f64).collect());
                let g = median(runs[wi][a].iter().map(|r| r.rss_freed_1s as f64).collect());
                format!("{} / {}", mib(f), mib(g))
            });
            let cells: Vec<String> = std::iter::once(workloads[wi].0.to_string())
                .chain(ratio)
                .chain(after)
                .collect();
            s += &row(&cells);
        }
    }
    s
}

/// Minor page faults per workload and allocator (medians), and poolalloc's against jemalloc's: a
/// fault is a trap into the kernel and a page zeroed, a cost the time column includes but does not
/// name.
fn faults_table(workloads: &[&(&str, Workload, bool)], runs: &[Vec<Vec<Run>>]) -> String {
    let mut s = String::from(
        "\nMinor page faults of each child process (`getrusage` `ru_minflt`, start-up included), medians; \
         ratio = poolalloc / jemalloc (target: at most 1.00).\n\n",
    );
    let columns: Vec<&str> = std::iter::once("workload")
        .chain(RUNNERS)
        .chain(["faults ratio"])
        .collect();
    s += &header(&columns);
    let mut above = 0;
    for (wi, w) in workloads.iter().enumerate() {
        let f: Vec<f64> = (0..RUNNERS.len())
            .map(|a| median(runs[wi][a].iter().map(|r| r.faults as f64).collect()))
            .collect();
        let ratio = f[0] / f[2].max(1.0);
        above += usize::from(ratio > 1.0);
        let mut cells = vec![w.0.to_string()];
        cells.extend(f.iter().map(|x| format!("{x:.0}")));
        cells.push(format!("**{ratio:.2}**"));
        s += &row(&cells);
    }
    s += &format!(
        "\nFaults above jemalloc's on {above} of {} workloads (target: none).\n",
        workloads.len()
    );
    s
}

/// Requests per second and p99 latency of the workloads that report them (the service), medians
/// per allocator. Both ratios read like the main table's, below 1 better: the best peer's
/// requests per second over poolalloc's, and poolalloc's p99 over the best peer's.
fn service_table(workloads: &[&(&str, Workload, bool)], runs: &[Vec<Vec<Run>>]) -> String {
    let services: Vec<usize> = (0..workloads.len())
        .filter(|&wi| runs[wi].iter().flatten().any(|r| r.p99_us.is_some()))
        .collect();
    if services.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\nService: requests per second and p99 request latency in microseconds (medians); req/s ratio = \
         best of jemalloc and mimalloc / poolalloc, p99 ratio = poolalloc / best of jemalloc and mimalloc \
         (below 1 is better for both).\n\n",
    );
    s += &header(&[
        "workload",
        "poolalloc req/s",
        "system req/s",
        "jemalloc req/s",
        "mimalloc req/s",
        "req/s ratio",
        "poolalloc p99",
        "system p99",
        "jemalloc p99",
        "mimalloc p99",
        "p99 ratio",
    ]);
    for wi in services {
        let med = |a: usize, f: fn(&Run) -> Option<f64>| {
            median(runs[wi][a].iter().filter_map(f).collect())
        };
        let ops: Vec<f64> = (0..4).map(|a| med(a, |r| r.ops_per_sec)).collect();
        let p99: Vec<f64> = (0..4).map(|a| med(a, |r| r.p99_us)).collect();
        let cells: Vec<String> = std::iter::once(workloads[wi].0.to_string())
            .chain(ops.iter().map(|o| format!("{o:.0}")))
            .chain([format!("**{:.2}**", ops[2].max(ops[3]) / ops[0])])
            .chain(p99.iter().map(|p| format!("{p:.0}")))
            .chain([format!("**{:.2}**", p99[0] / p99[2].min(p99[3]))])
            .collect();
        s += &row(&cells);
    }
    s
}

/// `ratios.svg`/`.png` (poolalloc's time and peak RSS ratios) and, per fragmentation workload,
/// `rss-<workload>.svg`/`.png` (RSS over time under each allocator, from the last round); the
/// service's too.
pub fn charts(
    dir: &std::path::Path,
    workloads: &[&(&str, Workload, bool)],
    runs: &[Vec<Vec<Run>>],
) {
    if !register_font() {
        eprintln!("no DejaVuSans.ttf found (install fonts-dejavu-core): charts skipped");
        return;
    }
    let names: Vec<&str> = workloads.iter().map(|w| w.0).collect();
    let ratios: Vec<(f64, f64)> = (0..workloads.len())
        .map(|wi| {
            let t: Vec<f64> = (0..4)
                .map(|a| median(runs[wi][a].iter().map(|r| r.secs).collect()))
                .collect();
            let m: Vec<f64> = (0..4)
                .map(|a| median(runs[wi][a].iter().map(|r| r.peak_rss as f64).collect()))
                .collect();
            (t[0] / t[2].min(t[3]), m[0] / m[2].min(m[3]))
        })
        .collect();
    let bars = RatioBars {
        caption: "poolalloc / best of jemalloc and mimalloc (below 1 is better)",
        time_label: "time",
        names_height: 90,
        names_style: Names::Rotated,
        names: &names,
        ratios: &ratios,
    };
    let svg = dir.join("ratios.svg");
    let png = dir.join("ratios.png");
    bars.draw(plotters::prelude::SVGBackend::new(&svg, (1100, 520)))
        .ok();
    bars.draw(plotters::prelude::BitMapBackend::new(&png, (1100, 520)))
        .ok();
    for (wi, w) in workloads.iter().enumerate().filter(|(_, w)| sampled(w)) {
        // The last round's samples of each allocator.
        let series: Vec<(&str, Vec<(u32, usize)>)> = (0..4)
            .map(|a| {
                (
                    ALLOCATORS[a],
                    runs[wi][a]
                        .last()
                        .map(|r| r.samples.clone())
                        .unwrap_or_default(),
                )
            })
            .collect();
        rss_chart(dir, &format!("rss-{}", w.0), w.0, &series);
    }
}

/// `<stem>.svg` and `<stem>.png` in `dir`: RSS over time of the workload `name` under each
/// allocator (`series`: its name and (ms, bytes) samples). The caller has registered the font.
pub(super) fn rss_chart(
    dir: &std::path::Path,
    stem: &str,
    name: &str,
    series: &[(&str, Vec<(u32, usize)>)],
) {
    let (svg, png) = (
        dir.join(format!("{stem}.svg")),
        dir.join(format!("{stem}.png")),
    );
    draw_rss(
        plotters::prelude::SVGBackend::new(&svg, (900, 420)),
        name,
        series,
    );
    draw_rss(
        plotters::prelude::BitMapBackend::new(&png, (900, 420)),
        name,
        series,
    );
}

/// RSS over time of one workload under each allocator (`series`: its name and (ms, bytes) samples).
fn draw_rss<B: plotters::prelude::DrawingBackend>(
    backend: B,
    name: &str,
    series: &[(&str, Vec<(u32, usize)>)],
) {
    use plotters::prelude::*;
    let root = backend.into_drawing_area();
    root.fill(&WHITE).ok();
    let tmax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .max()
        .unwrap_or(1)
        .max(1) as f64
        / 1000.0;
    let ymax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .max()
        .unwrap_or(1) as f64
        / 1048576.0
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{name}: RSS over time"), ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..tmax, 0f64..ymax.max(1.0))
        .unwrap();
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("RSS (MiB)")
        .draw()
        .unwrap();
    for (k, (alloc, pts)) in series.iter().enumerate() {
        chart
            .draw_series(LineSeries::new(
                pts.iter()
                    .map(|&(ms, r)| (ms as f64 / 1000.0, r as f64 / 1048576.0)),
                COLORS[k].stroke_width(2),
            ))
            .unwrap()
            .label(*alloc)
            .legend(move |(x, y)| {
                PathElement::new([(x, y), (x + 15, y)], COLORS[k].stroke_width(2))
            });
    }
    legend(&mut chart);
    root.present().ok();
}
