//! The soak (issue 34, "memory flat over hours"): `cargo bench --bench report -- --soak[=MINUTES]`
//! (10 minutes by default; `--soak=0.5` or `--soak=30s` for a quick try; names after `--` pick
//! workloads, as in the report). Never run by CI.
//!
//! A service whose RSS creeps up over hours is the first complaint users make of an allocator. The
//! soak runs the report's http-service (one runtime serving for the whole time, its clients hanging
//! up and connecting again) and rayon-reduce called again and again (each call a new pool of
//! workers whose hash maps other workers free, then exit: remote frees and abandoned chunks, where
//! a thread-owned allocator would leak if it leaked anywhere), under every allocator of the report,
//! each in its own child process, one after the other with the order rotated per workload. The
//! hardened build is left out: it is poolalloc's allocator with checks, and would cost a second
//! build.
//!
//! Each child samples once a second: RSS (`/proc/self/statm`), live bytes (`poolalloc::stats()`:
//! small slots plus large blocks, approximate while threads allocate; blank for the peers, which
//! do not know it and whose workloads do not count it) and minor faults (`ru_minflt`), into
//! `target/poolalloc-report/soak/<workload>-<allocator>.csv`. The parent reads them back into
//! `soak.md` (per workload and allocator: peak RSS, RSS at the end, the slope of RSS after the
//! first minute, faults a second, the targets) and `soak-<workload>.svg`/`.png` (RSS over
//! time), beside the report's own files.

use super::output::rss_chart;
use super::{ALLOCATORS, Params, minor_faults, params_from_env, peak_rss, rss_now, service};
use crate::harness::cargo::report_dir;
use crate::harness::chart::register_font;
use crate::harness::run::interleaved;
use crate::harness::stats::mib;
use crate::harness::table::{header, row};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A soak's workload: runs until the instant it is given.
type Soak = fn(Params, Instant);

/// The soak's workloads.
const WORKLOADS: &[(&str, Soak)] = &[
    ("http-service", service::http_service_until),
    ("rayon-reduce", rayon_reduce_until),
];

/// rayon-reduce, the report's workload as it is, called until `until`.
fn rayon_reduce_until(p: Params, until: Instant) {
    while Instant::now() < until {
        super::rayon_reduce::rayon_reduce(p);
    }
}

/// The targets: RSS after the first minute within ±1% (of its mean) per 10 minutes, and
/// peak RSS at most 1.10 of the best peer's.
const SLOPE_TARGET: f64 = 1.0;
const PEAK_TARGET: f64 = 1.10;

/// The soak's length from `--soak[=MINUTES]`: `None` without the flag, 10 minutes for a bare
/// `--soak`; MINUTES may have a fraction, or be seconds with an `s` after them (`--soak=30s`).
pub fn length(args: &[String]) -> Option<Duration> {
    let arg = args
        .iter()
        .find(|a| *a == "--soak" || a.starts_with("--soak="))?;
    let value = arg.strip_prefix("--soak=").unwrap_or("10");
    let secs = match value.strip_suffix('s') {
        Some(s) => s.parse::<f64>().ok(),
        None => value.parse::<f64>().ok().map(|m| m * 60.0),
    };
    match secs {
        Some(s) if s.is_finite() && s >= 1.0 => Some(Duration::from_secs_f64(s)),
        _ => panic!(
            "--soak={value}: minutes (`--soak=2`, `--soak=0.5`) or seconds (`--soak=30s`), at least one second"
        ),
    }
}

/// Whether this child is a soak's (the parent passes it the soak's length).
pub fn is_soak_child() -> bool {
    std::env::var_os("POOLALLOC_BENCH_SOAK_SECS").is_some()
}

/// One sample of a child.
struct Sample {
    /// Since the workload started.
    ms: u32,
    rss: usize,
    /// `poolalloc::stats()`'s live bytes, where the allocator is poolalloc.
    live: Option<usize>,
    /// Minor faults of the process so far.
    faults: u64,
}

/// The child: runs `workload` for the soak's length while a thread samples once a second, writes
/// the samples to the CSV file the parent names, and prints the peak RSS.
pub fn child(workload: &str) {
    let secs: f64 = std::env::var("POOLALLOC_BENCH_SOAK_SECS")
        .unwrap()
        .parse()
        .expect("the parent passes the soak's length in seconds");
    let csv = std::env::var_os("POOLALLOC_BENCH_SOAK_CSV").expect("the parent names the CSV file");
    let run = WORKLOADS
        .iter()
        .find(|w| w.0 == workload)
        .expect("unknown soak workload")
        .1;
    let poolalloc = std::env::var("POOLALLOC_BENCH_ALLOC").is_ok_and(|a| a == "poolalloc");
    let t0 = Instant::now();
    let until = t0 + Duration::from_secs_f64(secs);
    let sampler = std::thread::spawn(move || {
        let mut samples = Vec::with_capacity(secs as usize + 2);
        for k in 0.. {
            // On whole seconds from the start (a late wake-up does not shift the next ones), and a
            // last one at the end.
            let at = (t0 + Duration::from_secs(k)).min(until);
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            let live = poolalloc.then(|| {
                let s = poolalloc::stats();
                s.live_bytes + s.large_bytes
            });
            samples.push(Sample {
                ms: t0.elapsed().as_millis() as u32,
                rss: rss_now(),
                live,
                faults: minor_faults(),
            });
            if at == until {
                break;
            }
        }
        samples
    });
    run(params_from_env(), until);
    let samples = sampler.join().unwrap();
    let mut text = String::from("ms,rss_bytes,live_bytes,minor_faults\n");
    for s in &samples {
        let live = s.live.map(|l| l.to_string()).unwrap_or_default();
        writeln!(text, "{},{},{live},{}", s.ms, s.rss, s.faults).unwrap();
    }
    std::fs::write(&csv, text).expect("cannot write the soak's CSV file");
    println!("SOAK peak_rss={}", peak_rss());
}

/// The samples of a child's CSV file.
fn read_csv(path: &Path) -> Vec<Sample> {
    let text = std::fs::read_to_string(path).expect("the child wrote no CSV file");
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            Sample {
                ms: f[0].parse().unwrap(),
                rss: f[1].parse().unwrap(),
                live: f[2].parse().ok(),
                faults: f[3].parse().unwrap(),
            }
        })
        .collect()
}

/// A child's figures.
struct Soaked {
    /// The child's peak RSS (`VmHWM`: between samples too).
    peak: usize,
    samples: Vec<Sample>,
}

impl Soaked {
    /// The samples the slope is fitted to: after the first minute, or the second half of a soak
    /// shorter than two minutes.
    fn settled(&self) -> &[Sample] {
        let end = self.samples.last().map_or(0, |s| s.ms);
        let from = if end >= 120_000 { 60_000 } else { end / 2 };
        let first = self.samples.partition_point(|s| s.ms < from);
        &self.samples[first..]
    }

    /// The least-squares slope of `y` over the settled samples, in % of its mean per 10 minutes;
    /// `None` where a sample has no `y` or there are fewer than two samples.
    fn slope(&self, y: fn(&Sample) -> Option<usize>) -> Option<f64> {
        let points: Vec<(f64, f64)> = self
            .settled()
            .iter()
            .map(|s| Some((f64::from(s.ms) / 1000.0, y(s)? as f64)))
            .collect::<Option<_>>()?;
        if points.len() < 2 {
            return None;
        }
        let n = points.len() as f64;
        let (mx, my) = (
            points.iter().map(|p| p.0).sum::<f64>() / n,
            points.iter().map(|p| p.1).sum::<f64>() / n,
        );
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
        Some(sxy / sxx * 600.0 / my * 100.0)
    }

    /// Minor faults a second between the first sample and the last.
    fn faults_per_s(&self) -> f64 {
        let (a, b) = (&self.samples[0], self.samples.last().unwrap());
        (b.faults - a.faults) as f64 / (f64::from(b.ms - a.ms) / 1000.0).max(1e-3)
    }
}

/// The parent: every workload under every allocator for `length`, each in a child of its own,
/// then the table and the charts.
pub fn run(length: Duration, only: &[&String]) {
    let exe = std::env::current_exe().unwrap();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    // The full report's scale.
    let scale = 4;
    let dir = report_dir();
    let csv_dir = dir.join("soak");
    std::fs::create_dir_all(&csv_dir).unwrap();
    let workloads: Vec<&(&str, Soak)> = WORKLOADS
        .iter()
        .filter(|w| only.is_empty() || only.iter().any(|o| w.0.contains(o.as_str())))
        .collect();
    let mut soaked: Vec<Vec<Option<Soaked>>> = workloads
        .iter()
        .map(|_| ALLOCATORS.iter().map(|_| None).collect())
        .collect();
    eprintln!(
        "soak: {} workload(s) × {} allocators × {:.1} min, one at a time",
        workloads.len(),
        ALLOCATORS.len(),
        length.as_secs_f64() / 60.0
    );
    interleaved(1, workloads.len(), ALLOCATORS.len(), |_, wi, ai| {
        let (w, alloc) = (workloads[wi].0, ALLOCATORS[ai]);
        let csv = csv_dir.join(format!("{w}-{alloc}.csv"));
        let out = Command::new(&exe)
            .env("POOLALLOC_BENCH_WORKLOAD", w)
            .env("POOLALLOC_BENCH_ALLOC", alloc)
            .env("POOLALLOC_BENCH_THREADS", threads.to_string())
            .env("POOLALLOC_BENCH_SCALE", scale.to_string())
            .env(
                "POOLALLOC_BENCH_SOAK_SECS",
                length.as_secs_f64().to_string(),
            )
            .env("POOLALLOC_BENCH_SOAK_CSV", &csv)
            .output()
            .expect("cannot run the soak child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let peak = stdout
            .lines()
            .find_map(|l| l.strip_prefix("SOAK peak_rss=")?.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "soak {w} with {alloc} failed ({}):\n{stdout}\n{}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        let s = Soaked {
            peak,
            samples: read_csv(&csv),
        };
        let line = format!(
            "{w:<13} {alloc:<10} peak RSS {:>7} MiB  end {:>7} MiB  slope {:>+7.2} %/10 min",
            mib(s.peak as f64),
            mib(s.samples.last().unwrap().rss as f64),
            s.slope(|s| Some(s.rss)).unwrap_or(f64::NAN)
        );
        soaked[wi][ai] = Some(s);
        line
    });
    let soaked: Vec<Vec<Soaked>> = soaked
        .into_iter()
        .map(|w| w.into_iter().map(Option::unwrap).collect())
        .collect();
    let names: Vec<&str> = workloads.iter().map(|w| w.0).collect();
    let md = table(&names, &soaked, length, threads, scale);
    println!("{md}");
    std::fs::write(dir.join("soak.md"), &md).unwrap();
    if register_font() {
        for (name, runs) in names.iter().zip(&soaked) {
            let series: Vec<(&str, Vec<(u32, usize)>)> = ALLOCATORS
                .iter()
                .zip(runs)
                .map(|(a, r)| (*a, r.samples.iter().map(|s| (s.ms, s.rss)).collect()))
                .collect();
            rss_chart(
                &dir,
                &format!("soak-{name}"),
                &format!("soak, {name}"),
                &series,
            );
        }
    } else {
        eprintln!("no DejaVuSans.ttf found (install fonts-dejavu-core): charts skipped");
    }
    eprintln!(
        "wrote {} and the samples in {}",
        dir.join("soak.md").display(),
        csv_dir.display()
    );
}

/// The Markdown tables, one per workload: a row per allocator.
fn table(
    names: &[&str],
    soaked: &[Vec<Soaked>],
    length: Duration,
    threads: usize,
    scale: usize,
) -> String {
    let mut s = format!(
        "Soak: {:.1} min per workload and allocator, each in its own process, one after the other; \
         {threads} threads, scale {scale}. RSS sampled once a second. Slope: least squares of RSS \
         (live: of poolalloc's live bytes, `poolalloc::stats()`) over the samples after the first \
         minute (the second half of a soak under two minutes), in % of their mean per 10 minutes; \
         target within ±{SLOPE_TARGET:.0}%. Peak RSS (`VmHWM`) / the best of the peers' (the \
         allocators other than poolalloc and system); target at most {PEAK_TARGET:.2}. Live bytes \
         are blank for the peers, which do not count them.\n",
        length.as_secs_f64() / 60.0
    );
    let is_peer = |a: &&str| *a != "poolalloc" && *a != "system";
    for (name, runs) in names.iter().zip(soaked) {
        let best_peer = ALLOCATORS
            .iter()
            .zip(runs)
            .filter(|(a, _)| is_peer(a))
            .map(|(_, r)| r.peak)
            .min()
            .unwrap_or(0)
            .max(1);
        write!(s, "\n{name}\n\n").unwrap();
        s += &header(&[
            "allocator",
            "peak RSS MiB",
            "RSS at end MiB",
            "RSS slope %/10 min",
            "slope target ±1%",
            "peak / best peer",
            "peak target ≤ 1.10",
            "faults/s",
            "live at end MiB",
            "live slope %/10 min",
        ]);
        for (alloc, r) in ALLOCATORS.iter().zip(runs) {
            let last = r.samples.last().unwrap();
            let slope = r.slope(|s| Some(s.rss));
            let peak = r.peak as f64 / best_peer as f64;
            let verdict = |ok: bool| if ok { "pass" } else { "**fail**" }.to_string();
            s += &row(&[
                alloc.to_string(),
                mib(r.peak as f64),
                mib(last.rss as f64),
                slope.map_or("n/a".into(), |x| format!("{x:+.2}")),
                slope.map_or("n/a".into(), |x| verdict(x.abs() <= SLOPE_TARGET)),
                format!("{peak:.3}"),
                verdict(peak <= PEAK_TARGET),
                format!("{:.0}", r.faults_per_s()),
                last.live.map_or(String::new(), |l| mib(l as f64)),
                r.slope(|s| s.live)
                    .map_or(String::new(), |x| format!("{x:+.2}")),
            ]);
        }
    }
    s
}
