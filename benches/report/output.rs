//! The report's output: the Markdown tables (times, peak RSS, ratios, the cost of hardening,
//! services' throughput and latency, fragmentation) and the charts (the ratios, and RSS over time
//! of the fragmentation workloads and the service).

use super::huge_pages::thp_mode;
use super::{ALLOCATORS, BASELINE, HARDENED, PEERS, RUNNERS, Run, Workload, runner_name, sampled};
use crate::harness::chart::{COLORS, Names, RatioBars, legend, register_font};
use crate::harness::stats::{geomean, median, mib};
use crate::harness::table::{header, row};

/// The peers' names for the captions: "jemalloc, mimalloc, rusty_alloc and snmalloc".
fn peer_names() -> String {
    let names: Vec<&str> = PEERS.map(|a| ALLOCATORS[a]).collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The median of `f` over one workload's rounds under each runner (`runs` is `runs[workload]`).
fn medians(runs: &[Vec<Run>], f: impl Fn(&Run) -> f64) -> Vec<f64> {
    runs.iter()
        .map(|r| median(r.iter().map(&f).collect()))
        .collect()
}

/// The share of a child's anonymous memory in huge pages near its peak RSS (`huge_pages.rs`).
fn huge_share(r: &Run) -> f64 {
    r.huge as f64 / r.anon.max(1) as f64
}

/// A share as a whole percentage.
fn percent(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// A figure with `digits` decimals, or a dash where there is none (NaN: the runner has no result,
/// a workload newer than the baseline).
fn cell(x: f64, digits: usize) -> String {
    if x.is_nan() {
        "–".to_string()
    } else {
        format!("{x:.digits$}")
    }
}

/// The best peer's figure: the lowest of the peers' values (a time, a peak RSS, a latency).
fn best_peer(v: &[f64]) -> f64 {
    PEERS.map(|a| v[a]).fold(f64::INFINITY, f64::min)
}

/// poolalloc's time and peak-RSS ratios to the best peer's on one workload (`runs[workload]`; below
/// 1 is better).
fn peer_ratios(runs: &[Vec<Run>]) -> (f64, f64) {
    let t = medians(runs, |r| r.secs);
    let m = medians(runs, |r| r.peak_rss as f64);
    (t[0] / best_peer(&t), m[0] / best_peer(&m))
}

/// The Markdown table: medians per workload and allocator, and poolalloc's ratio to the best peer.
pub fn table(
    workloads: &[&(&str, Workload, bool)],
    runs: &[Vec<Vec<Run>>],
    threads: usize,
    rounds: usize,
    quick: bool,
    baseline: Result<String, String>,
) -> String {
    let mut s = String::new();
    s += &format!(
        "Medians of {rounds} interleaved run(s) per cell, {threads} threads{}; {}. Time in seconds, peak RSS in MiB; \
         vs best peer = poolalloc / best of {} (below 1 is better); poolalloc huge = the share of its \
         anonymous memory in huge pages near its peak RSS (every allocator's: the huge-page table below); \
         hardened cost = poolalloc built with `--features hardened` / poolalloc; \
         vs baseline = poolalloc / poolalloc as of the pinned baseline commit (`benches/report/baseline.rs`; \
         above 1 is slower than the last build).\n\n",
        if quick {
            ", quick mode (small inputs)"
        } else {
            ""
        },
        thp_mode(),
        peer_names()
    );
    let columns: Vec<String> = std::iter::once("workload".to_string())
        .chain(ALLOCATORS.iter().map(|a| format!("{a} s")))
        .chain(["time vs best peer".to_string()])
        .chain(ALLOCATORS.iter().map(|a| format!("{a} RSS")))
        .chain(
            [
                "RSS vs best peer",
                "poolalloc huge",
                "hardened s",
                "hardened cost",
                "baseline s",
                "vs baseline",
            ]
            .map(String::from),
        )
        .collect();
    s += &header(&columns);
    // Per workload: (time ratio, peak-RSS ratio, hardened cost), from the same medians as the table.
    let mut ratios: Vec<(f64, f64, f64)> = Vec::new();
    // Per workload with a baseline cell: its name and this build's time over the baseline's.
    let mut vs_baseline: Vec<(&str, f64)> = Vec::new();
    for (wi, w) in workloads.iter().enumerate() {
        let t = medians(&runs[wi], |r| r.secs);
        let m = medians(&runs[wi][..ALLOCATORS.len()], |r| r.peak_rss as f64);
        let (time, rss) = peer_ratios(&runs[wi]);
        let cost = t[HARDENED] / t[0];
        let huge = medians(&runs[wi][..1], huge_share)[0];
        ratios.push((time, rss, cost));
        let vs_base = t[0] / t[BASELINE];
        if !vs_base.is_nan() {
            vs_baseline.push((w.0, vs_base));
        }
        let cells: Vec<String> = std::iter::once(w.0.to_string())
            .chain(t[..ALLOCATORS.len()].iter().map(|x| format!("{x:.3}")))
            .chain([format!("**{time:.2}**")])
            .chain(m.iter().map(|&x| mib(x)))
            .chain([
                format!("**{rss:.2}**"),
                percent(huge),
                format!("{:.3}", t[HARDENED]),
                format!("**{cost:.2}**"),
                cell(t[BASELINE], 3),
                if vs_base.is_nan() {
                    "–".to_string()
                } else {
                    format!("**{vs_base:.2}**")
                },
            ])
            .collect();
        s += &row(&cells);
    }
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
    s += &baseline_text(&baseline, &vs_baseline, workloads.len());
    s += &faults_table(workloads, runs);
    s += &huge_table(workloads, runs);
    s += &service_table(workloads, runs);
    let frag: Vec<usize> = (0..workloads.len()).filter(|&i| workloads[i].2).collect();
    if !frag.is_empty() {
        s += "\nFragmentation: peak RSS / peak live requested bytes (lower is better), and RSS (MiB) right after \
              freeing everything / one second later, with no call to the allocator.\n\n";
        s += &header(
            &std::iter::once("workload".to_string())
                .chain(ALLOCATORS.iter().map(|a| a.to_string()))
                .chain(ALLOCATORS.iter().map(|a| format!("{a} after free")))
                .collect::<Vec<String>>(),
        );
        for wi in frag {
            let ratio = (0..ALLOCATORS.len()).map(|a| {
                let r = median(
                    runs[wi][a]
                        .iter()
                        .map(|r| r.peak_rss as f64 / r.peak_live.max(1) as f64)
                        .collect(),
                );
                format!("{r:.2}")
            });
            let after = (0..ALLOCATORS.len()).map(|a| {
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

/// What the report says of the baseline: the geometric mean of this build's time over the
/// baseline's, a line for each workload more than 3% slower than the baseline, and which workloads
/// have no baseline cell; or why there is no baseline column at all.
fn baseline_text(
    baseline: &Result<String, String>,
    vs: &[(&str, f64)],
    workloads: usize,
) -> String {
    let name = match baseline {
        Err(why) => return format!("\nNo baseline column: {why}.\n"),
        Ok(name) => name,
    };
    if vs.is_empty() {
        return format!("\nAgainst the {name}: no workload ran there.\n");
    }
    let ratios: Vec<f64> = vs.iter().map(|v| v.1).collect();
    let mut s = format!(
        "\nAgainst the {name} (poolalloc then; `benches/report/baseline.rs`): time **{:.2}** in geometric mean over {} workloads{}.\n",
        geomean(&ratios),
        vs.len(),
        if vs.len() < workloads {
            format!(
                " ({} newer than the baseline, no cell)",
                workloads - vs.len()
            )
        } else {
            String::new()
        }
    );
    let slower: Vec<&(&str, f64)> = vs.iter().filter(|v| v.1 > 1.03).collect();
    if slower.is_empty() {
        s += "No workload more than 3% slower than the baseline.\n";
    } else {
        s += "More than 3% slower than the baseline:\n\n";
        for (w, r) in slower {
            s += &format!("- {w}: **{r:.2}** of the baseline's time\n");
        }
    }
    s
}

/// Minor page faults per workload and allocator (medians), and poolalloc's against jemalloc's: a
/// fault is a trap into the kernel and a page zeroed, a cost the time column includes but does not
/// name. Not against the best peer: mimalloc's count stays near 260 on every workload, hundreds of
/// MiB of RSS included (benches/results/faults.md), so the fewest would be mimalloc's always and
/// would not count the same thing.
fn faults_table(workloads: &[&(&str, Workload, bool)], runs: &[Vec<Vec<Run>>]) -> String {
    let mut s = String::from(
        "\nMinor page faults of each child process (`getrusage` `ru_minflt`, start-up included), medians; \
         ratio = poolalloc / jemalloc (target: at most 1.00).\n\n",
    );
    let columns: Vec<&str> = std::iter::once("workload")
        .chain((0..RUNNERS).map(runner_name))
        .chain(["faults ratio"])
        .collect();
    s += &header(&columns);
    let mut above = 0;
    for (wi, w) in workloads.iter().enumerate() {
        let f = medians(&runs[wi], |r| r.faults as f64);
        let ratio = f[0] / f[2].max(1.0);
        above += usize::from(ratio > 1.0);
        let mut cells = vec![w.0.to_string()];
        cells.extend(f.iter().map(|&x| cell(x, 0)));
        cells.push(format!("**{ratio:.2}**"));
        s += &row(&cells);
    }
    s += &format!(
        "\nFaults above jemalloc's on {above} of {} workloads (target: none).\n",
        workloads.len()
    );
    s
}

/// The share of each child's anonymous memory in transparent huge pages near its peak RSS, per
/// workload and runner (medians), the kernel's count for every allocator; and poolalloc's own count
/// of its chunk memory in huge pages at the same moment.
fn huge_table(workloads: &[&(&str, Workload, bool)], runs: &[Vec<Vec<Run>>]) -> String {
    let mut s = format!(
        "\nHuge pages: `AnonHugePages` / `Anonymous` of each child (`/proc/self/smaps_rollup`), read each time its \
         RSS grew by a quarter, at the reading with the largest RSS (so within a quarter of its peak); medians; \
         {}. poolalloc own = `Stats::huge_page_share` at the same reading (its chunk memory in advised 2 MiB \
         units; large blocks not counted).\n\n",
        thp_mode()
    );
    let columns: Vec<&str> = std::iter::once("workload")
        .chain((0..RUNNERS).map(runner_name))
        .chain(["poolalloc own"])
        .collect();
    s += &header(&columns);
    for (wi, w) in workloads.iter().enumerate() {
        let shares = medians(&runs[wi], huge_share);
        let own: Vec<f64> = runs[wi][0]
            .iter()
            .filter_map(|r| r.own_huge_share)
            .collect();
        let mut cells = vec![w.0.to_string()];
        cells.extend(
            shares
                .iter()
                .map(|&x| if x.is_nan() { cell(x, 0) } else { percent(x) }),
        );
        cells.push(if own.is_empty() {
            String::new()
        } else {
            percent(median(own))
        });
        s += &row(&cells);
    }
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
    let peers = peer_names();
    let mut s = format!(
        "\nService: requests per second and p99 request latency in microseconds (medians); req/s ratio = \
         best of {peers} / poolalloc, p99 ratio = poolalloc / best of {peers} (below 1 is better for \
         both).\n\n",
    );
    s += &header(
        &std::iter::once("workload".to_string())
            .chain(ALLOCATORS.iter().map(|a| format!("{a} req/s")))
            .chain(["req/s ratio".to_string()])
            .chain(ALLOCATORS.iter().map(|a| format!("{a} p99")))
            .chain(["p99 ratio".to_string()])
            .collect::<Vec<String>>(),
    );
    for wi in services {
        let med = |a: usize, f: fn(&Run) -> Option<f64>| {
            median(runs[wi][a].iter().filter_map(f).collect())
        };
        let ops: Vec<f64> = (0..ALLOCATORS.len())
            .map(|a| med(a, |r| r.ops_per_sec))
            .collect();
        let p99: Vec<f64> = (0..ALLOCATORS.len())
            .map(|a| med(a, |r| r.p99_us))
            .collect();
        // The most requests per second of the peers: the lowest of their times per request.
        let best_ops = 1.0 / best_peer(&ops.iter().map(|o| 1.0 / o).collect::<Vec<f64>>());
        let cells: Vec<String> = std::iter::once(workloads[wi].0.to_string())
            .chain(ops.iter().map(|o| format!("{o:.0}")))
            .chain([format!("**{:.2}**", best_ops / ops[0])])
            .chain(p99.iter().map(|p| format!("{p:.0}")))
            .chain([format!("**{:.2}**", p99[0] / best_peer(&p99))])
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
    let ratios: Vec<(f64, f64)> = runs.iter().map(|r| peer_ratios(r)).collect();
    let caption = format!("poolalloc / best of {} (below 1 is better)", peer_names());
    let bars = RatioBars {
        caption: &caption,
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
        let series: Vec<(&str, Vec<(u32, usize)>)> = (0..ALLOCATORS.len())
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
