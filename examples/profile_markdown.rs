//! The profiler on one of the report's real-crate workloads (markdown-html, `benches/report/markdown.rs`):
//! `pulldown-cmark` renders the `.md` files of cargo's registry sources to HTML, as a documentation
//! server does, and keeps every page in a cache. Each document is rendered once per set of
//! extensions (the 32 combinations of the five a typical renderer turns on: one per site of a
//! multi-site server), so the cache holds some hundred MiB: enough live bytes for the default
//! sampling rate (one sample per 512 KiB) to estimate them within a few percent.
//!
//! Writes `markdown.pb.gz` (pprof) and `markdown.svg` (flamegraph of the live bytes) to the
//! directory given as the first argument (default `target/poolalloc-profile/`), and prints the
//! profile's estimate of the live bytes next to the exact figures:
//!
//! ```sh
//! cargo run --release --example profile_markdown --features profiling -- target/poolalloc-profile
//! go tool pprof -top -sample_index=inuse_space target/poolalloc-profile/markdown.pb.gz
//! ```
//!
//! `pulldown-cmark` is a dev-dependency where the report's peers are (Linux with glibc): elsewhere
//! the example only says so.

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

#[cfg(all(target_os = "linux", target_env = "gnu", not(poolalloc_no_bench_peers)))]
#[path = "../benches/report/registry.rs"]
#[allow(dead_code)] // the report's assertion, registry_texts, is not used here
mod registry;

#[cfg(all(target_os = "linux", target_env = "gnu", not(poolalloc_no_bench_peers)))]
mod markdown {
    use super::registry;
    use poolalloc::profile::{self, Config};
    use poolalloc_test_support::pprof;
    use std::hint::black_box;
    use std::path::PathBuf;

    const MIB: f64 = (1 << 20) as f64;

    /// The `.md` files (at most 256 KiB each: generated files say little about a heap) under cargo's
    /// registry sources, sorted by path: the report's input (`benches/report/registry.rs`), all
    /// of it.
    #[inline(never)]
    fn read_documents() -> Vec<String> {
        let (docs, _) = registry::read_registry("md", usize::MAX);
        assert!(
            !docs.is_empty(),
            "no .md files under {}: build the benchmarks first (their dependencies' sources are the input)",
            registry::cargo_home().display()
        );
        black_box(docs)
    }

    /// The extensions of `benches/report/markdown.rs`: site `i` turns on those of the bits of `i`.
    fn options(site: usize) -> pulldown_cmark::Options {
        use pulldown_cmark::Options;
        [
            Options::ENABLE_TABLES,
            Options::ENABLE_FOOTNOTES,
            Options::ENABLE_STRIKETHROUGH,
            Options::ENABLE_TASKLISTS,
            Options::ENABLE_HEADING_ATTRIBUTES,
        ]
        .iter()
        .enumerate()
        .filter(|(bit, _)| site & (1 << bit) != 0)
        .fold(Options::empty(), |o, (_, &x)| o | x)
    }

    /// Renders every document for every site into the cache.
    #[inline(never)]
    fn render_pages(docs: &[String], cache: &mut Vec<String>) {
        for site in 0..32 {
            for d in docs {
                let mut html = String::new();
                pulldown_cmark::html::push_html(
                    &mut html,
                    pulldown_cmark::Parser::new_ext(d, options(site)),
                );
                cache.push(html);
            }
        }
        black_box(cache);
    }

    /// Bytes requested by live blocks, small and large (the profiler records requested sizes).
    fn requested() -> usize {
        let s = poolalloc::stats();
        s.requested_bytes + s.large_bytes
    }

    pub fn main() -> Result<(), Box<dyn std::error::Error>> {
        let dir = PathBuf::from(
            std::env::args()
                .nth(1)
                .unwrap_or_else(|| "target/poolalloc-profile".to_owned()),
        );
        std::fs::create_dir_all(&dir)?;

        let before = requested();
        profile::start(Config::default())?;
        let docs = read_documents();
        let mut cache = Vec::new();
        render_pages(&docs, &mut cache);
        profile::stop();
        let after = requested();

        let pb = dir.join("markdown.pb.gz");
        let svg = dir.join("markdown.svg");
        profile::dump(&pb)?;
        profile::flamegraph(&svg)?;

        // The exact live bytes of what the program keeps: the blocks of the strings and vectors.
        let docs_bytes = docs.iter().map(String::capacity).sum::<usize>()
            + docs.capacity() * size_of::<String>();
        let pages_bytes = cache.iter().map(String::capacity).sum::<usize>()
            + cache.capacity() * size_of::<String>();
        let exact = docs_bytes + pages_bytes;
        let input: usize = docs.iter().map(String::len).sum();
        println!(
            "{} documents ({:.1} MiB of Markdown), {} pages cached ({:.1} MiB of HTML)",
            docs.len(),
            input as f64 / MIB,
            cache.len(),
            cache.iter().map(String::len).sum::<usize>() as f64 / MIB,
        );

        let p = pprof::read(&pb);
        let est = p.total("main", "inuse_space");
        // For blocks much smaller than the interval R the estimate's standard deviation is about
        // sqrt(R × bytes) (see tests/profile.rs).
        let sd = (profile::DEFAULT_INTERVAL as f64 * exact as f64).sqrt();
        println!(
            "live bytes, estimated by the profile: {:.1} MiB (read_documents {:.1}, render_pages {:.1})",
            est / MIB,
            p.total("read_documents", "inuse_space") / MIB,
            p.total("render_pages", "inuse_space") / MIB,
        );
        println!(
            "live bytes, exact (capacities):       {:.1} MiB (documents {:.1}, pages {:.1}); \
             estimate {:+.1}% (sampling sd ±{:.1}%)",
            exact as f64 / MIB,
            docs_bytes as f64 / MIB,
            pages_bytes as f64 / MIB,
            100.0 * (est - exact as f64) / exact as f64,
            100.0 * sd / exact as f64,
        );
        println!(
            "live bytes, exact (poolalloc::stats() requested bytes, after - before): {:.1} MiB",
            after.saturating_sub(before) as f64 / MIB
        );
        println!("wrote {} and {}", pb.display(), svg.display());
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(poolalloc_no_bench_peers)))]
    return markdown::main();
    #[cfg(not(all(target_os = "linux", target_env = "gnu", not(poolalloc_no_bench_peers))))]
    {
        eprintln!(
            "profile_markdown: Linux with glibc only (pulldown-cmark is a dev-dependency there)"
        );
        Ok(())
    }
}
