//! The report's output: the Markdown tables (times, peak RSS, ratios, the cost of hardening,
//! services' throughput and latency, fragmentation) and the charts (the ratios, and RSS over time
//! of the fragmentation workloads and the service).

use super::huge_pages::thp_mode;
use super::{ALLOCATORS, BASELINE, Entry, HARDENED, PEERS, RUNNERS, Run, runner_name, sampled};
use crate::harness::chart::{COLORS, Names, RatioBars, legend, register_font};
use crate::harness::noise::{MARGIN, MIN_ROUNDS, Ratio, Spread, Verdict};
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

/// The peer with the lowest of the peers' values (`v` per runner).
fn best_peer_index(v: &[f64]) -> usize {
    PEERS
        .min_by(|&a, &b| v[a].partial_cmp(&v[b]).unwrap_or(std::cmp::Ordering::Equal))
        .unwrap_or(PEERS.start)
}

/// One runner's per-round times of a workload.
fn secs(r: &[Run]) -> Vec<f64> {
    r.iter().map(|r| r.secs).collect()
}

/// What the report says of one workload (`runs[workload]`): each runner's time, and poolalloc's
/// ratios, each paired by round (`noise.rs`).
struct Figures {
    /// Per runner, the spread of its per-round times.
    times: Vec<Spread>,
    /// The fastest peer by median time, and poolalloc's time over its, round by round.
    peer: usize,
    vs_peer: Ratio,
    /// The peer with the lowest median peak RSS, and poolalloc's peak RSS over its.
    rss_peer: usize,
    rss_vs_peer: Ratio,
    /// poolalloc built with `hardened` over poolalloc.
    cost: Ratio,
    /// poolalloc over the baseline (no rounds where the baseline has no cell).
    vs_base: Ratio,
}

impl Figures {
    fn of(runs: &[Vec<Run>]) -> Figures {
        let times: Vec<Spread> = runs.iter().map(|r| Spread::of(&secs(r))).collect();
        let medians_t: Vec<f64> = times.iter().map(|t| t.median).collect();
        let peer = best_peer_index(&medians_t);
        let rss = |r: &[Run]| r.iter().map(|r| r.peak_rss as f64).collect::<Vec<f64>>();
        let rss_peer = best_peer_index(&medians(runs, |r| r.peak_rss as f64));
        Figures {
            vs_peer: Ratio::of(&secs(&runs[0]), &secs(&runs[peer])),
            rss_vs_peer: Ratio::of(&rss(&runs[0]), &rss(&runs[rss_peer])),
            cost: Ratio::of(&secs(&runs[HARDENED]), &secs(&runs[0])),
            vs_base: Ratio::of(&secs(&runs[0]), &secs(&runs[BASELINE])),
            times,
            peer,
            rss_peer,
        }
    }
}

/// poolalloc's time and peak-RSS ratios to the best peer's on one workload (`runs[workload]`; below
/// 1 is better): the medians of the per-round ratios.
fn peer_ratios(runs: &[Vec<Run>]) -> (f64, f64) {
    let f = Figures::of(runs);
    (f.vs_peer.spread.median, f.rss_vs_peer.spread.median)
}

/// How the report was run.
pub struct Setup<'a> {
    pub threads: usize,
    pub rounds: usize,
    pub quick: bool,
    /// Each workload's scale, in the order of the workloads.
    pub scales: &'a [usize],
    /// The baseline column's name, or why there is none.
    pub baseline: Result<String, String>,
    /// A planted slowdown (`--plant=WORKLOAD:PERCENT`), for the test of the flags.
    pub plant: Option<(&'a str, u32)>,
}

/// How to read a ratio and its spread, and when it is flagged: the report's one sentence on it,
/// also in README.md's Results.
fn how_to_read(rounds: usize) -> String {
    format!(
        "A ratio is the median of its {rounds} per-round ratios (each round's runs were made side by side), \
         with the lowest and highest of them in brackets, and it is called slower or faster only when every \
         round's ratio lies beyond 1 ± {:.0}% on the same side ({} rounds or more), otherwise level (within noise).",
        MARGIN * 100.0,
        MIN_ROUNDS
    )
}

/// The workloads named in `list`, or "none".
fn names_or_none(list: &[String]) -> String {
    if list.is_empty() {
        "none".to_string()
    } else {
        list.join(", ")
    }
}

/// The Markdown table: per workload and runner the median time and its spread over the rounds, and
/// poolalloc's ratios with their spreads and verdicts.
pub fn table(workloads: &[&Entry], runs: &[Vec<Vec<Run>>], setup: &Setup) -> String {
    let Setup {
        threads,
        rounds,
        quick,
        ..
    } = *setup;
    let figures: Vec<Figures> = runs.iter().map(|r| Figures::of(r)).collect();
    let mut s = String::new();
    s += &format!(
        "Medians of {rounds} interleaved run(s) per cell, {threads} threads{}; {}. {}\n\n",
        if quick {
            ", quick mode (each workload at the scale in its row)"
        } else {
            ""
        },
        thp_mode(),
        how_to_read(rounds)
    );
    s += &noise_band(workloads, &figures);
    if let Some((w, percent)) = setup.plant {
        s += &format!(
            "Planted slowdown (`--plant`): poolalloc's children of {w} spin for {percent}% more of their time; \
             a test of the flags, not a measurement.\n\n"
        );
    }
    s += &format!(
        "Time in seconds (median ±half the range of the rounds, over the median), peak RSS in MiB; \
         vs best peer = poolalloc / the fastest of {} by median (below 1 is better); poolalloc huge = the \
         share of its anonymous memory in huge pages near its peak RSS (every allocator's: the huge-page \
         table below); hardened cost = poolalloc built with `--features hardened` / poolalloc; \
         vs baseline = poolalloc / the baseline (`benches/report/baseline.rs`; above 1 is slower than \
         the last build).\n\n",
        peer_names()
    );
    let columns: Vec<String> = ["workload", "scale"]
        .map(String::from)
        .into_iter()
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
    for (wi, w) in workloads.iter().enumerate() {
        let f = &figures[wi];
        let m = medians(&runs[wi][..ALLOCATORS.len()], |r| r.peak_rss as f64);
        let huge = medians(&runs[wi][..1], huge_share)[0];
        let cells: Vec<String> = [w.0.to_string(), setup.scales[wi].to_string()]
            .into_iter()
            .chain(f.times[..ALLOCATORS.len()].iter().map(Spread::time))
            .chain([format!("{} ({})", f.vs_peer.judged(), ALLOCATORS[f.peer])])
            .chain(m.iter().map(|&x| mib(x)))
            .chain([
                format!(
                    "{} ({})",
                    f.rss_vs_peer.spread.ratio(),
                    ALLOCATORS[f.rss_peer]
                ),
                percent(huge),
                f.times[HARDENED].time(),
                f.cost.spread.ratio(),
                f.times[BASELINE].time(),
                f.vs_base.judged(),
            ])
            .collect();
        s += &row(&cells);
    }
    if !figures.is_empty() {
        let time: Vec<f64> = figures.iter().map(|f| f.vs_peer.spread.median).collect();
        let rss: Vec<f64> = figures
            .iter()
            .map(|f| f.rss_vs_peer.spread.median)
            .collect();
        let costs: Vec<f64> = figures.iter().map(|f| f.cost.spread.median).collect();
        let judged = |v: Verdict| -> Vec<String> {
            (0..workloads.len())
                .filter(|&i| figures[i].vs_peer.verdict == v)
                .map(|i| format!("{} {:.2}", workloads[i].0, time[i]))
                .collect()
        };
        let (slower, faster) = (judged(Verdict::Slower), judged(Verdict::Faster));
        s += &format!(
            "\nTime ratio to the best peer, geometric mean over the workloads: **{:.2}** ({}; target: at most 0.90). \
             Behind the best peer beyond noise on {} of {} (target: none): {}; ahead beyond noise on {}: {}; \
             level within noise on the other {}. Peak-RSS ratio at most **{:.2}** (target: at most 1.10).\n",
            geomean(&time),
            per_round_geomeans(figures.iter().map(|f| &f.vs_peer)),
            slower.len(),
            workloads.len(),
            names_or_none(&slower),
            faster.len(),
            names_or_none(&faster),
            workloads.len() - slower.len() - faster.len(),
            rss.iter().copied().fold(0.0, f64::max),
        );
        s += &format!(
            "\nHardened cost, geometric mean over the workloads: **{:.2}** ({}; `hardened`, its default level; \
             target: at most 1.10, never above 1.25).\n",
            geomean(&costs),
            per_round_geomeans(figures.iter().map(|f| &f.cost)),
        );
    }
    s += &baseline_text(&setup.baseline, workloads, &figures);
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

/// The noise of this run, from its own cells: how far a cell's rounds spread (half the range over
/// the median, the median of that over every cell and the widest), and the shortest cell.
fn noise_band(workloads: &[&Entry], figures: &[Figures]) -> String {
    let mut spreads: Vec<(f64, &str, &str)> = Vec::new();
    let mut shortest: Option<(f64, &str, &str)> = None;
    for (w, f) in workloads.iter().zip(figures) {
        for (ai, t) in f.times.iter().enumerate() {
            if t.median.is_nan() {
                continue;
            }
            spreads.push((t.half_range(), w.0, runner_name(ai)));
            if shortest.is_none_or(|s| t.median < s.0) {
                shortest = Some((t.median, w.0, runner_name(ai)));
            }
        }
    }
    let (Some(widest), Some(shortest)) = (
        spreads
            .iter()
            .copied()
            .max_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal)),
        shortest,
    ) else {
        return String::new();
    };
    format!(
        "This run's noise: a cell's rounds lie within ±{:.0}% of its median in the median cell, ±{:.0}% at the \
         widest ({} under {}); the shortest cell is {} under {}, {:.3} s.\n\n",
        median(spreads.iter().map(|s| s.0).collect()) * 100.0,
        widest.0 * 100.0,
        widest.1,
        widest.2,
        shortest.1,
        shortest.2,
        shortest.0,
    )
}

/// The geometric mean over the workloads of each round's ratios, as "per round 1.12–1.18"
/// (rounds where a workload has no ratio are left out).
fn per_round_geomeans<'a>(ratios: impl Iterator<Item = &'a Ratio>) -> String {
    let ratios: Vec<&Ratio> = ratios.collect();
    let rounds = ratios.iter().map(|r| r.rounds.len()).max().unwrap_or(0);
    let means: Vec<f64> = (0..rounds)
        .filter_map(|i| {
            let v: Vec<f64> = ratios
                .iter()
                .filter_map(|r| r.rounds.get(i).copied())
                .filter(|x| !x.is_nan())
                .collect();
            (!v.is_empty()).then(|| geomean(&v))
        })
        .collect();
    let s = Spread::of(&means);
    if s.median.is_nan() {
        String::new()
    } else {
        format!("per round {:.2}–{:.2}", s.min, s.max)
    }
}

/// What the report says of the baseline: the geometric mean of this build's time over the
/// baseline's, the workloads slower or faster than the baseline beyond noise, and which workloads
/// have no baseline cell; or why there is no baseline column at all.
fn baseline_text(
    baseline: &Result<String, String>,
    workloads: &[&Entry],
    figures: &[Figures],
) -> String {
    let name = match baseline {
        Err(why) => return format!("\nNo baseline column: {why}.\n"),
        Ok(name) => name,
    };
    let with: Vec<usize> = (0..workloads.len())
        .filter(|&i| !figures[i].vs_base.spread.median.is_nan())
        .collect();
    if with.is_empty() {
        return format!("\nAgainst the {name}: no workload ran there.\n");
    }
    let ratios: Vec<f64> = with
        .iter()
        .map(|&i| figures[i].vs_base.spread.median)
        .collect();
    let judged = |v: Verdict| -> Vec<String> {
        with.iter()
            .filter(|&&i| figures[i].vs_base.verdict == v)
            .map(|&i| format!("{} {}", workloads[i].0, figures[i].vs_base.spread.ratio()))
            .collect()
    };
    let (slower, faster) = (judged(Verdict::Slower), judged(Verdict::Faster));
    format!(
        "\nAgainst the {name} (poolalloc then; `benches/report/baseline.rs`): time **{:.2}** in geometric mean \
         over {} workloads ({}){}. Slower than the baseline beyond noise: {}. Faster beyond noise: {}. \
         Level within noise: the other {}.\n",
        geomean(&ratios),
        with.len(),
        per_round_geomeans(with.iter().map(|&i| &figures[i].vs_base)),
        if with.len() < workloads.len() {
            format!(
                "; {} newer than the baseline, no cell",
                workloads.len() - with.len()
            )
        } else {
            String::new()
        },
        names_or_none(&slower),
        names_or_none(&faster),
        with.len() - slower.len() - faster.len(),
    )
}

/// The report as JSON (`report.json`): per workload each runner's per-round times with their
/// spread, and poolalloc's ratios with their per-round values, spread and verdict; for scripts
/// (`benches/noise-check.sh`) and for comparing two runs.
pub fn json(workloads: &[&Entry], runs: &[Vec<Vec<Run>>], setup: &Setup) -> String {
    use serde_json::{Value, json};
    let spread = |s: &Spread| json!({"median": s.median, "min": s.min, "max": s.max});
    let ratio = |r: &Ratio| {
        json!({
            "rounds": r.rounds,
            "median": r.spread.median,
            "min": r.spread.min,
            "max": r.spread.max,
            // No verdict where there is no pair (a workload newer than the baseline).
            "verdict": (!r.rounds.is_empty()).then(|| r.verdict.word()),
        })
    };
    let rows: Vec<Value> = workloads
        .iter()
        .enumerate()
        .map(|(wi, w)| {
            let f = Figures::of(&runs[wi]);
            let runners: serde_json::Map<String, Value> = (0..RUNNERS)
                .map(|ai| {
                    let mut t = spread(&f.times[ai]);
                    t["rounds"] = json!(secs(&runs[wi][ai]));
                    (runner_name(ai).to_string(), t)
                })
                .collect();
            json!({
                "workload": w.0,
                "scale": setup.scales[wi],
                "secs": runners,
                "best_peer": ALLOCATORS[f.peer],
                "vs_best_peer": ratio(&f.vs_peer),
                "rss_vs_best_peer": ratio(&f.rss_vs_peer),
                "hardened_cost": ratio(&f.cost),
                "vs_baseline": ratio(&f.vs_base),
            })
        })
        .collect();
    let doc = json!({
        "rounds": setup.rounds,
        "threads": setup.threads,
        "quick": setup.quick,
        "margin": MARGIN,
        "min_rounds": MIN_ROUNDS,
        "baseline": setup.baseline.as_ref().ok(),
        "plant": setup.plant.map(|(w, p)| json!({"workload": w, "percent": p})),
        "workloads": rows,
    });
    // NaN (no cell) is written as null by serde_json.
    serde_json::to_string_pretty(&doc).unwrap() + "\n"
}

/// Minor page faults per workload and allocator (medians), and poolalloc's against jemalloc's: a
/// fault is a trap into the kernel and a page zeroed, a cost the time column includes but does not
/// name. Not against the best peer: mimalloc's count stays near 260 on every workload, hundreds of
/// MiB of RSS included (benches/results/faults.md), so the fewest would be mimalloc's always and
/// would not count the same thing.
fn faults_table(workloads: &[&Entry], runs: &[Vec<Vec<Run>>]) -> String {
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
fn huge_table(workloads: &[&Entry], runs: &[Vec<Vec<Run>>]) -> String {
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
fn service_table(workloads: &[&Entry], runs: &[Vec<Vec<Run>>]) -> String {
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
pub fn charts(dir: &std::path::Path, workloads: &[&Entry], runs: &[Vec<Vec<Run>>]) {
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
