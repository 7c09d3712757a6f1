//! Runtime settings: each has a default, a value fixed in code before `main` (`poolalloc::settings!`,
//! [`Settings`](crate::Settings)), an environment variable read once (without allocating, when
//! the program starts, or before that at the first use of any setting), and a Rust setter with a
//! getter. A setter wins over the environment, the environment over the code's fixed values,
//! those over the default, whichever comes first.
//!
//! Each setting is one row of the table below (`table!`): its variable's name, the kind of value
//! it takes (which parses and prints it), its default, its Rust interface and what it does. From
//! that one row come its static, the match of its variable, the list of known names in the
//! warning for an unknown one, its line of the `POOLALLOC_VERBOSE` print, and its row of the table
//! in `docs/stats-and-settings.md` (a unit test fails when that page says otherwise).
//!
//! A privileged process (set-user-ID, set-group-ID or file capabilities: Linux's `AT_SECURE`,
//! `issetugid` on the BSDs and macOS) ignores every `POOLALLOC_*` variable, with one line on
//! stderr saying so: whoever starts it controls its environment. Settings made in code apply.
//!
//! Every value, whatever its source (the environment, `Settings` in code, a setter), passes its
//! setting's bounds in one place, [`Setting::set_from`], the only writer of a setting's value:
//! one from the environment outside them is refused like a value that does not parse, one from
//! code is taken at the nearest bound (`set_purge_delay(Duration::MAX)` is a day). A setting added
//! to the table cannot skip it.
//!
//! A `POOLALLOC_` name that is not in the table, or a value that does not parse or is out of its
//! bounds, gets one warning line on stderr naming it, and the default stays: never a crash, never
//! silence. (Names under
//! `POOLALLOC_TEST_` and `POOLALLOC_BENCH_` belong to this project's own test and benchmark
//! harnesses and are passed over.) Booleans take
//! `1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off`.

use crate::base::stack_text::StackText;
use crate::os;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::Relaxed};
use core::time::Duration;

/// One setting: what the table says of it, its value, and where the value came from. A later
/// source wins over an earlier one only if it ranks as high: a run-time setter over the
/// environment, the environment over [`Settings`](crate::Settings) fixed in code before `main`
/// (`poolalloc::settings!`), those over the built-in default; whichever runs first.
struct Setting {
    /// The variable's name after `POOLALLOC_`.
    name: &'static str,
    /// How its value is written, held and shown.
    kind: Kind,
    /// The built-in default, as held.
    default: usize,
    /// The default as the docs say it, where it depends on the target; else the docs show
    /// `default` as the variable would take it.
    #[cfg_attr(not(test), allow(dead_code))]
    default_doc: Option<&'static str>,
    /// The Rust interface to it, for the docs (markdown).
    #[cfg_attr(not(test), allow(dead_code))]
    rust: &'static str,
    /// What it does, for the docs (markdown, one line).
    #[cfg_attr(not(test), allow(dead_code))]
    doc: &'static str,
    value: AtomicUsize,
    /// [`DEFAULT`], [`IN_CODE`], [`FROM_ENV`] or [`BY_SETTER`]: the highest that set it.
    source: AtomicU8,
}

const DEFAULT: u8 = 0;
const IN_CODE: u8 = 1;
const FROM_ENV: u8 = 2;
const BY_SETTER: u8 = 3;
/// How the verbose print names each source.
const SOURCES: [&str; 4] = ["default", "in code", "environment", "setter"];

impl Setting {
    fn get(&self) -> usize {
        load();
        self.value.load(Relaxed)
    }

    fn set(&self, v: usize) {
        self.set_from(BY_SETTER, v);
    }

    /// False when `v` is out of the setting's bounds (refused).
    fn set_from_env(&self, v: usize) -> bool {
        self.set_from(FROM_ENV, v)
    }

    /// Sets `v` unless a source that ranks higher than `source` set it already: the only writer
    /// of a setting's value (a unit test holds this file to it), so every value of every source
    /// passes its kind's bounds here ([`Kind::bound`]). From the environment a value outside them
    /// is refused (false: the caller says so; a typo, not a wish); from code (`Settings`, a
    /// setter) it is taken at the nearest bound. (Each source is one thread's at a time in
    /// practice: the constructors before `main`, the environment read once, the program's
    /// setters; a race between two of them ends with either value.)
    fn set_from(&self, source: u8, v: usize) -> bool {
        let v = match self.kind.bound(v) {
            Ok(v) => v,
            Err(_) if source == FROM_ENV => return false,
            Err(nearest) => nearest,
        };
        if self.source.load(Relaxed) <= source {
            self.source.store(source, Relaxed);
            self.value.store(v, Relaxed);
        }
        true
    }

    /// Takes the variable's value `value`, or says why not and keeps the value in force.
    fn take_from_env(&self, value: &[u8]) {
        if let Kind::Prefix = self.kind {
            return take_prefix(self, value);
        }
        match self.kind.parse(value) {
            Some(v) if self.set_from_env(v) => {}
            _ => say(format_args!(
                "POOLALLOC_{}={} is not {}: keeping {}",
                self.name,
                Text(value),
                Expected(self.kind),
                Shown(self.kind, self.value.load(Relaxed))
            )),
        }
    }
}

/// How a setting's value is written in its variable, held in its `usize`, and shown (as the
/// variable would take it: what the verbose print and the docs show parses back).
#[derive(Clone, Copy)]
enum Kind {
    /// A whole number from 0 to `max`, in decimal.
    Number { max: usize },
    /// `1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off` (empty: off), held as 1 or 0.
    Switch,
    /// `off`, or a factor above 1 up to [`MAX_PROF_PEAK_MILLI`] thousandths with up to three
    /// decimals (`1.5`), held in thousandths (0: off).
    Factor,
    /// A path prefix of 1 to [`PROF_PREFIX_MAX`] bytes, held in [`PROF_PREFIX`]; the value is
    /// its length (0: none).
    Prefix,
    /// [`LargeBlocks`] by name, held as its discriminant.
    Large,
    /// [`HugePages`]: `off`, `on` or a number of MiB, held as [`HugePages::raw`].
    Huge,
}

impl Kind {
    /// The value `v` of the variable means, as held; None if it means nothing. Not checked
    /// against the bounds: [`Setting::set_from`] does that, for every source. (Not for
    /// [`Kind::Prefix`], whose bytes are kept apart.)
    fn parse(self, v: &[u8]) -> Option<usize> {
        match self {
            Kind::Number { .. } => parse_number(v, usize::MAX),
            Kind::Switch => parse_bool(v).map(usize::from),
            Kind::Factor if v == b"off" => Some(0),
            Kind::Factor => parse_milli(v),
            Kind::Prefix => None,
            Kind::Large => match v {
                b"system" => Some(LargeBlocks::System as usize),
                b"system-kept" => Some(LargeBlocks::SystemKept as usize),
                b"spans" => Some(LargeBlocks::Spans as usize),
                _ => None,
            },
            Kind::Huge => match v {
                b"off" | b"never" => Some(HugePages::Off.raw()),
                b"on" | b"always" => Some(HugePages::PastMiB(0).raw()),
                _ => parse_number(v, HugePages::Off.raw() - 1),
            },
        }
    }

    /// Checks a value as held against the kind's bounds: `Ok(v)` when it is one the kind takes,
    /// else `Err` with the nearest one that is. [`Setting::set_from`] calls it for every value.
    fn bound(self, v: usize) -> Result<usize, usize> {
        let nearest = match self {
            Kind::Number { max } => v.min(max),
            Kind::Switch => v.min(1),
            Kind::Factor if v == 0 => 0,
            Kind::Factor => v.clamp(1001, MAX_PROF_PEAK_MILLI),
            Kind::Prefix => v.min(PROF_PREFIX_MAX),
            Kind::Large => v.min(LargeBlocks::Spans as usize),
            Kind::Huge if v == HugePages::Off.raw() => v,
            Kind::Huge => v.min(MAX_HUGE_MIB),
        };
        if nearest == v { Ok(v) } else { Err(nearest) }
    }
}

/// What a kind's variable takes, for the warning about a value that does not parse.
struct Expected(Kind);

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Kind::Number { max } => write!(f, "a whole number from 0 to {max}"),
            Kind::Switch => f.write_str("1/0, true/false, yes/no or on/off"),
            Kind::Factor => f.write_str("`off` or a factor above 1 (such as 1.5) up to 1000"),
            Kind::Prefix => write!(f, "a path prefix of 1 to {PROF_PREFIX_MAX} bytes"),
            Kind::Large => f.write_str("`system`, `system-kept` or `spans`"),
            Kind::Huge => write!(f, "`off`, `on` or a number of MiB up to {MAX_HUGE_MIB}"),
        }
    }
}

/// A value as held, shown as the variable would take it.
struct Shown(Kind, usize);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.1;
        match self.0 {
            Kind::Number { .. } | Kind::Switch => write!(f, "{v}"),
            Kind::Factor if v == 0 => f.write_str("off"),
            Kind::Factor => {
                write!(f, "{}", v / 1000)?;
                let mut frac = v % 1000;
                if frac != 0 {
                    f.write_char('.')?;
                    let mut unit = 100;
                    while frac != 0 {
                        f.write_char((b'0' + (frac / unit) as u8) as char)?;
                        frac %= unit;
                        unit /= 10;
                    }
                }
                Ok(())
            }
            Kind::Prefix if v == 0 => f.write_str("none"),
            Kind::Prefix => {
                let p = PROF_PREFIX.lock();
                write!(f, "{}", Text(&p.buf[..p.len]))
            }
            Kind::Large => f.write_str(match LargeBlocks::from_usize(v) {
                LargeBlocks::System => "system",
                LargeBlocks::SystemKept => "system-kept",
                LargeBlocks::Spans => "spans",
            }),
            Kind::Huge => match HugePages::from_raw(v) {
                HugePages::Off => f.write_str("off"),
                HugePages::PastMiB(0) => f.write_str("on"),
                HugePages::PastMiB(m) => write!(f, "{m}"),
            },
        }
    }
}

/// Declares the settings, each once: `NAME: kind, default value[, shown "docs' default"], rust
/// "interface", "what it does";` makes the static `NAME` (the variable is `POOLALLOC_NAME`) and
/// [`ALL`], every one in the table's order.
macro_rules! table {
    ($(
        $(#[doc = $comment:literal])*
        $name:ident: $kind:expr, default $default:expr $(, shown $shown:literal)?,
        rust $rust:literal, $doc:literal;
    )+) => {
        $(
            $(#[doc = $comment])*
            static $name: Setting = Setting {
                name: stringify!($name),
                kind: $kind,
                default: $default,
                default_doc: table!(@shown $($shown)?),
                rust: $rust,
                doc: $doc,
                value: AtomicUsize::new($default),
                source: AtomicU8::new(DEFAULT),
            };
        )+
        /// Every setting, in the order of the table.
        static ALL: &[&Setting] = &[$(&$name),+];
    };
    (@shown) => { None };
    (@shown $shown:literal) => { Some($shown) };
}

table! {
    PURGE_DELAY_MS: Kind::Number { max: MAX_DELAY_MS }, default 250,
        rust "`set_purge_delay(Duration)`, `purge_delay()`, `Settings::purge_delay`",
        "how long, in milliseconds, an empty chunk (beyond the retained ones) or a freed span \
         waits before it goes back to the OS, and how long after the last large block freed to \
         the system allocator it is trimmed; 0: at once, and no purger thread (nor trim)";
    RETAINED_CHUNKS: Kind::Number { max: MAX_RETAINED }, default 1,
        rust "`set_retained_chunks(n)`, `retained_chunks()`, `Settings::retained_chunks`",
        "empty chunks each size class keeps past the purge delay";
    HUGE_PAGES: Kind::Huge, default HugePages::DEFAULT.raw(),
        rust "`set_huge_pages(HugePages)`, `huge_pages()`, `Settings::huge_pages`",
        "Linux: new 4 MiB regions of chunks ask for transparent huge pages (`MADV_HUGEPAGE`; \
         nothing where THP is `never`): `on` every region, `N` those mapped once N MiB of chunks \
         were, `off` none; nothing where a huge page is larger than a 2 MiB unit (AArch64 with \
         16 or 64 KiB pages). Chunks fill the fullest 2 MiB unit first and an emptied unit goes \
         back whole; `Stats::huge_page_bytes` counts the chunk memory in huge pages. Far fewer faults \
         for large heaps, nothing for small programs with `32`, but 1.5–1.9× the CPU time where a \
         large heap is freed and rebuilt on the measuring VM (fresh huge pages are zeroed, and \
         there mostly faulted in by the host): off by default; figures: \
         `benches/results/huge-pages-default.md`";
    LARGE_BLOCKS: Kind::Large, default LargeBlocks::DEFAULT as usize,
        shown "`spans` (x86-64 Linux, glibc and musl; musl elsewhere), `system` (elsewhere: not \
               measured there)",
        rust "`set_large_blocks(LargeBlocks)`, `large_blocks()`, `Settings::large_blocks`",
        "where blocks above 64 KiB come from: `system` (the system allocator as it is), \
         `system-kept` (glibc told once, by `mallopt`, to keep freed blocks up to 32 MiB for \
         reuse; process-wide), `spans` (poolalloc's own mappings, as the C library's; always, \
         where the C library is the process's `malloc`); figures: \
         `benches/results/large-blocks-rust.md`";
    SHOW_STATS: Kind::Switch, default 0,
        rust "`Settings::show_stats`",
        "`1`: print `stats()` to stderr when the process exits";
    VERBOSE: Kind::Switch, default 0,
        rust "`Settings::verbose`",
        "`1`: print the settings when they are read, each with where its value came from, and \
         anomalies (the purger cannot start, the OS refused memory)";
    PROF: Kind::Prefix, default 0, shown "none",
        rust "`profile::start`, `profile::dump`, `profile::Dumps::prefix`",
        "a path prefix: sample from the start and write `<prefix>.<pid>.pb.gz` (pprof) at exit \
         (feature `profiling`, see [profiling.md](profiling.md))";
    PROF_INTERVAL: Kind::Number { max: MAX_PROF_INTERVAL }, default 512 * 1024,
        rust "`profile::Config::interval`",
        "the profiler's mean bytes between samples; 0: every allocation";
    /// The peak factor in thousandths (0: no dump at new peaks).
    PROF_PEAK: Kind::Factor, default 0,
        rust "`profile::Dumps::peak_factor`",
        "a factor above 1 (`1.5`): with `POOLALLOC_PROF`, also write \
         `<prefix>.<pid>.<seq>.pb.gz` each time the profile's live bytes reach this factor times \
         those of the last such dump (the first at this factor times 1 MiB)";
    PROF_SIGNAL: Kind::Switch, default 0,
        rust "`profile::Dumps::on_signal`",
        "`1`: with `POOLALLOC_PROF`, also write a numbered profile on `SIGUSR2` (Unix)";
    PROF_EVERY_S: Kind::Number { max: MAX_PROF_EVERY_S }, default 0,
        rust "`profile::Dumps::every`",
        "N: with `POOLALLOC_PROF`, also write a numbered profile every N seconds; 0: never";
    PROF_MAX_DUMPS: Kind::Number { max: MAX_PROF_DUMPS }, default 100,
        rust "`profile::Dumps::max_dumps`",
        "the most numbered profiles (peak, signal, period) a process writes; past it, one line on \
         stderr and no more (whoever may signal the process cannot fill its disk)";
    PROF_MIN_GAP_MS: Kind::Number { max: MAX_DELAY_MS }, default 1000,
        rust "`profile::Dumps::min_gap`",
        "the least time in milliseconds between two numbered profiles: one due sooner waits for \
         it (signals meanwhile make one profile)";
    LOCK_WAIT_MS: Kind::Number { max: MAX_DELAY_MS }, default DEFAULT_LOCK_WAIT_MS,
        shown "`60000` with the `testing` feature, else `0`",
        rust "none (test harnesses set the variable)",
        "test and debug builds (feature `testing`, or `debug_assertions`): a thread that waited \
         this many milliseconds for one of the allocator's locks aborts with a message naming the \
         lock, its holder, where each took or waits for it, and every thread waiting for a lock \
         then; 0: never. Release builds without `testing` keep no such records";
}

/// `POOLALLOC_LOCK_WAIT_MS`'s default: a bound where the `testing` feature is on (a test suite's
/// hang aborts with its message), none elsewhere (a debugger's pause is no hang).
const DEFAULT_LOCK_WAIT_MS: usize = if cfg!(feature = "testing") { 60_000 } else { 0 };

// The bounds of every source ([`Kind::bound`]): beyond them, from the environment, a typo; from
// code, the bound.
/// The longest purge delay (a day; it fits the purger's 32-bit milliseconds).
const MAX_DELAY_MS: usize = 86_400_000;
/// The most retained chunks per class (1 GiB per class).
const MAX_RETAINED: usize = 4096;
/// The largest profiler interval (1 GiB).
const MAX_PROF_INTERVAL: usize = 1 << 30;
/// The longest period between numbered profiles (a week).
const MAX_PROF_EVERY_S: usize = 7 * 86_400;
/// The largest peak factor (1000, in thousandths).
const MAX_PROF_PEAK_MILLI: usize = 1_000_000;
/// The most numbered profiles a process may be set to write.
const MAX_PROF_DUMPS: usize = 1_000_000;
/// The largest `POOLALLOC_HUGE_PAGES` threshold (1 TiB).
const MAX_HUGE_MIB: usize = 1 << 20;

/// Writes the table of settings as `docs/stats-and-settings.md` shows it (markdown, one row a
/// setting); a unit test holds the page to it.
#[cfg_attr(not(test), allow(dead_code))]
fn write_docs_table(w: &mut impl Write) -> fmt::Result {
    w.write_str("| variable | Rust | default | what |\n|---|---|---|---|\n")?;
    for s in ALL {
        write!(w, "| `POOLALLOC_{}` | {} | ", s.name, s.rust)?;
        match s.default_doc {
            Some(d) => w.write_str(d)?,
            None => write!(w, "`{}`", Shown(s.kind, s.default))?,
        }
        writeln!(w, " | {} |", s.doc)?;
    }
    Ok(())
}

/// Where `PoolAlloc`'s large blocks (requests above the largest size class, or aligned beyond what
/// a class gives) come from. Whatever the setting is when a block is freed or reallocated, that is
/// done where the block came from (a span is recognised by the address map, not by the setting).
///
/// The default is [`Spans`](LargeBlocks::Spans) on x86-64 Linux, glibc and musl alike, and on
/// musl everywhere, and [`System`](LargeBlocks::System) elsewhere (not measured there: aarch64,
/// 32-bit Linux, macOS, FreeBSD, Windows). On glibc, since freed spans are
/// cut to size, joined again and kept in proportion to the live ones, spans took the report's
/// large-buffers to 0.70 of the system allocator's time with 0.57 of its faults, markdown-html and
/// rust-collections to half and two thirds of its faults, and no workload above 1.0 in CPU time
/// beyond noise; musl's malloc maps and unmaps every large block, so there it was never close.
/// [`SystemKept`](LargeBlocks::SystemKept) takes faults off too, but threads' arenas then keep up
/// to 8 MiB each past the purger's trim (27 MiB of 248 a second after `tests/stats.rs` freed
/// everything). `benches/results/large-blocks-rust.md` has the figures behind it. (Where `PoolAlloc` is the system allocator itself, on targets
/// without the pools, the setting changes nothing; where the C library `poolalloc-c` is the
/// process's `malloc`, large blocks are spans whatever it says.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LargeBlocks {
    /// The system allocator (`std::alloc::System`) with its own policy: glibc maps and unmaps
    /// each block above its mmap threshold (128 KiB at first, raised as such blocks are freed),
    /// musl every large block. The purger trims it (`malloc_trim`) once the program stops
    /// freeing large blocks.
    System = 0,
    /// The system allocator, told (once, at the first large block) to keep freed blocks up to
    /// 32 MiB for reuse instead of unmapping each one (glibc: `mallopt` `M_MMAP_THRESHOLD` 32 MiB
    /// and `M_TRIM_THRESHOLD` 8 MiB; elsewhere as [`System`](LargeBlocks::System)). The purger's
    /// trim still returns them within a second of the program going quiet. The `mallopt` call
    /// is process-wide (C code's `malloc` too) and stays when the setting changes afterwards.
    SystemKept = 1,
    /// Spans of poolalloc's own, as the C library's: whole pages of a mapping of ours per block,
    /// freed ones kept resident for reuse (cut to the size asked for, joined again when freed
    /// side by side; as many bytes as are live, 16 MiB at least) until the purge delay passes,
    /// grown in place into a freed neighbour or by moving pages (`mremap`) instead of copying.
    Spans = 2,
}

impl LargeBlocks {
    const DEFAULT: LargeBlocks = if cfg!(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_env = "musl")
    )) {
        LargeBlocks::Spans
    } else {
        LargeBlocks::System
    };

    fn from_usize(v: usize) -> LargeBlocks {
        match v {
            1 => LargeBlocks::SystemKept,
            2 => LargeBlocks::Spans,
            _ => LargeBlocks::System,
        }
    }
}

/// When the chunk source asks the OS for transparent huge pages for a new 4 MiB region of chunks
/// (Linux `MADV_HUGEPAGE`, where `/sys/kernel/mm/transparent_hugepage/enabled` is not `never` and
/// a huge page fits a 2 MiB unit of chunks: x86-64, AArch64 with 4 KiB pages; elsewhere, AArch64
/// with 16 or 64 KiB pages among them, whose huge pages are 32 or 512 MiB, the setting changes
/// nothing). A huge page is faulted in at once, 2 MiB in one trap instead of 512, so a growing
/// heap takes a fraction of the page faults, at a price: a 2 MiB page is resident as soon as one
/// of its eight chunks is touched, and the kernel zeroes it whole.
///
/// The chunk source keeps huge pages whole (`memory/source.rs`): a new chunk comes from the
/// fullest 2 MiB unit with a free chunk, a chunk given back inside a partly used huge unit keeps
/// its pages, and a unit whose chunks are all free goes back whole, one purge of 2 MiB. Free
/// chunks kept so are bounded: beyond the larger of 8 MiB and an eighth of the chunk memory for
/// longer than the purge delay, the purger purges them one by one (splitting their huge pages);
/// `trim` purges them all. `Stats::huge_page_bytes` counts the chunk memory in huge pages.
///
/// The default is [`Off`](HugePages::Off), by measurement (2-core AMD EPYC VM under Firecracker,
/// THP `madvise`, 2026-11-28; `benches/results/huge-pages-default.md`): with `PastMiB(32)`, the
/// candidate default, small programs paid nothing (they never map 32 MiB of chunks; every region
/// advised added 5 to 13 MiB of peak RSS to them, past 8 MiB still up to 6), and large heaps took
/// fewer faults (4 times fewer on frag-drift, 1.1 to 1.8 on the others), but the heaps that are freed and built again ran 1.5 to 1.9 times
/// the CPU time (frag-drift, frag-free-all; medians of 11 runs), the geometric mean over 20
/// workloads 1.07: the kernel zeroes each new huge page, and on this guest (free page reporting
/// hands freed 8 MiB blocks back to the host) a fresh huge page is often memory the host must
/// fault in again (the kernel's page zeroing was 77% of a slow run's profile). Set `PastMiB(32)` (`POOLALLOC_HUGE_PAGES=32`) for a large steady heap on a
/// host where huge pages come warm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HugePages {
    /// Never ask for huge pages.
    Off,
    /// Ask for every region mapped once the chunks mapped since start reach this many MiB (0:
    /// every region).
    PastMiB(usize),
}

impl HugePages {
    const DEFAULT: HugePages = HugePages::Off;

    const fn raw(self) -> usize {
        match self {
            HugePages::Off => usize::MAX,
            // usize::MAX stands for Off; a threshold that large is never reached anyway.
            HugePages::PastMiB(usize::MAX) => usize::MAX - 1,
            HugePages::PastMiB(m) => m,
        }
    }

    fn from_raw(v: usize) -> HugePages {
        if v == usize::MAX {
            HugePages::Off
        } else {
            HugePages::PastMiB(v)
        }
    }
}

/// Room for `POOLALLOC_PROF`'s path prefix (read without allocating).
pub(crate) const PROF_PREFIX_MAX: usize = 480;
struct Prefix {
    buf: [u8; PROF_PREFIX_MAX],
    len: usize,
}
static PROF_PREFIX: spin::Mutex<Prefix> = spin::Mutex::new(Prefix {
    buf: [0; PROF_PREFIX_MAX],
    len: 0,
});

/// Keeps `prefix` as the profile path prefix, unless a source that ranks higher than `source` set
/// one already.
fn keep_prefix(source: u8, prefix: &[u8]) {
    let mut p = PROF_PREFIX.lock();
    if PROF.source.load(Relaxed) <= source {
        p.buf[..prefix.len()].copy_from_slice(prefix);
        p.len = prefix.len();
        PROF.set_from(source, prefix.len());
    }
}

/// `POOLALLOC_PROF`: a path prefix, kept for the profiler (which must be compiled in).
fn take_prefix(s: &Setting, value: &[u8]) {
    if !cfg!(feature = "profiling") {
        say(format_args!(
            "POOLALLOC_PROF ignored: this build has no profiler (cargo feature `profiling`)"
        ));
    } else if value.is_empty() || value.len() > PROF_PREFIX_MAX || value.contains(&0) {
        say(format_args!(
            "POOLALLOC_{}={} is not {}: no profile",
            s.name,
            Text(value),
            Expected(s.kind)
        ));
    } else {
        keep_prefix(FROM_ENV, value);
    }
}

/// Sets how long an empty chunk (beyond the retained ones) waits before its memory goes back to
/// the OS, how long a freed span (a large block of the C library's, or of `PoolAlloc`'s where
/// [`LargeBlocks::Spans`] is in force) waits for reuse, and how long the program must free no
/// large block before the system allocator (which holds `PoolAlloc`'s other large blocks) is
/// asked to return its free pages (default 250 ms, or `POOLALLOC_PURGE_DELAY_MS`). Zero
/// returns chunks and spans the moment they are free and never starts the background purger
/// thread (nor trims the system allocator). Millisecond resolution, at most a day: a longer delay
/// (`Duration::MAX` included) is taken as a day, which [`purge_delay`] then says. Wins over the
/// environment.
pub fn set_purge_delay(d: Duration) {
    PURGE_DELAY_MS.set(d.as_millis().min(usize::MAX as u128) as usize);
}

/// The purge delay in force (see [`set_purge_delay`]).
pub fn purge_delay() -> Duration {
    Duration::from_millis(PURGE_DELAY_MS.get() as u64)
}

/// Sets how many empty chunks each size class keeps indefinitely instead of returning them to the
/// OS (default 1, or `POOLALLOC_RETAINED_CHUNKS`), at most 4096 (a larger number is taken as
/// 4096); wins over the environment.
pub fn set_retained_chunks(n: usize) {
    RETAINED_CHUNKS.set(n);
}

/// The number of empty chunks each size class keeps past the purge delay (see
/// [`set_retained_chunks`]); the others it retains wait for the delay.
pub fn retained_chunks() -> usize {
    RETAINED_CHUNKS.get()
}

/// Sets where `PoolAlloc`'s large blocks come from from now on (default: [`LargeBlocks`], or
/// `POOLALLOC_LARGE_BLOCKS`); blocks already allocated are freed where they came from. Wins over
/// the environment.
pub fn set_large_blocks(l: LargeBlocks) {
    LARGE_BLOCKS.set(l as usize);
}

/// Where `PoolAlloc`'s large blocks come from now (see [`set_large_blocks`]): always
/// [`Spans`](LargeBlocks::Spans) once the C library (`poolalloc-c`, preloaded or linked into the
/// executable) serves the process's `malloc`, whatever was set.
pub fn large_blocks() -> LargeBlocks {
    load();
    if malloc_is_ours() {
        return LargeBlocks::Spans;
    }
    large_blocks_raw()
}

/// Set once the size-less interface (`raw`) serves this process's `malloc` (the C library, preloaded
/// or linked into the executable): `std::alloc::System` is poolalloc itself then.
static MALLOC_IS_OURS: AtomicBool = AtomicBool::new(false);

/// Says that this process's `malloc` is poolalloc's (the C library calls it from its constructor):
/// from then on `PoolAlloc` takes its large blocks from spans directly, whatever
/// [`set_large_blocks`] or the environment said, instead of through `System` (which would reach
/// our `malloc` and count each block twice), and `trim` leaves out the system allocator's trim
/// (`malloc_trim` would be ours). Never undone.
pub(crate) fn set_malloc_is_ours() {
    MALLOC_IS_OURS.store(true, Relaxed);
}

/// Whether this process's `malloc` is poolalloc's (see [`set_malloc_is_ours`]).
#[inline]
pub(crate) fn malloc_is_ours() -> bool {
    MALLOC_IS_OURS.load(Relaxed)
}

/// Sets when new chunk regions ask for transparent huge pages (default [`HugePages`]'s, or
/// `POOLALLOC_HUGE_PAGES`); regions mapped already keep what they asked for. Wins over the
/// environment.
pub fn set_huge_pages(h: HugePages) {
    HUGE_PAGES.set(h.raw());
}

/// When new chunk regions ask for huge pages (see [`set_huge_pages`]).
pub fn huge_pages() -> HugePages {
    HugePages::from_raw(HUGE_PAGES.get())
}

/// The purge delay in milliseconds, for the purger and the chunk source.
pub(crate) fn purge_delay_ms() -> usize {
    PURGE_DELAY_MS.get()
}

/// How long a thread waits for a lock before it aborts, in milliseconds (`POOLALLOC_LOCK_WAIT_MS`;
/// 0: for ever). Test and debug builds only (`base/lock`).
#[cfg(any(feature = "testing", debug_assertions))]
pub(crate) fn lock_wait_ms() -> usize {
    LOCK_WAIT_MS.get()
}

/// Sets `POOLALLOC_LOCK_WAIT_MS` (the lock tests' children).
#[cfg(test)]
pub(crate) fn set_lock_wait_ms(ms: usize) {
    LOCK_WAIT_MS.set(ms);
}

/// Whether `stats()` is printed at exit (`POOLALLOC_SHOW_STATS`).
pub(crate) fn show_stats() -> bool {
    SHOW_STATS.get() != 0
}

/// Whether anomalies are reported on stderr (`POOLALLOC_VERBOSE`).
pub(crate) fn verbose() -> bool {
    VERBOSE.get() != 0
}

/// `POOLALLOC_PROF_INTERVAL`: the profiler's mean bytes between samples.
#[cfg_attr(not(feature = "profiling"), allow(dead_code))]
pub(crate) fn prof_interval() -> usize {
    PROF_INTERVAL.get()
}

/// `POOLALLOC_PROF`: copies the profile path prefix into `out` and returns its length (0: none,
/// the profiler is not started from the environment).
#[cfg_attr(not(feature = "profiling"), allow(dead_code))]
pub(crate) fn prof_prefix(out: &mut [u8; PROF_PREFIX_MAX]) -> usize {
    load();
    let p = PROF_PREFIX.lock();
    out[..p.len].copy_from_slice(&p.buf[..p.len]);
    p.len
}

/// When the profiler writes numbered profiles by itself (`POOLALLOC_PROF_PEAK`, `_SIGNAL`,
/// `_EVERY_S`, or `profile::dump_on`): (peak factor in thousandths or 0, on SIGUSR2, every N
/// seconds or 0).
#[cfg_attr(not(feature = "profiling"), allow(dead_code))]
pub(crate) fn prof_dumps() -> (usize, bool, usize) {
    (PROF_PEAK.get(), PROF_SIGNAL.get() != 0, PROF_EVERY_S.get())
}

/// The cap on numbered profiles (`POOLALLOC_PROF_MAX_DUMPS`, `POOLALLOC_PROF_MIN_GAP_MS`): (the
/// most a process writes, the least milliseconds between two).
#[cfg_attr(not(feature = "profiling"), allow(dead_code))]
pub(crate) fn prof_dump_cap() -> (usize, usize) {
    (PROF_MAX_DUMPS.get(), PROF_MIN_GAP_MS.get())
}

/// What `profile::dump_on` sets: the profile path prefix, when numbered profiles are written, and
/// (where `Some`) their cap. Values pass their settings' bounds as every value does.
#[cfg_attr(not(feature = "profiling"), allow(dead_code))]
pub(crate) struct ProfDumps<'a> {
    pub prefix: &'a [u8],
    pub peak_milli: usize,
    pub signal: bool,
    pub every_s: usize,
    pub max_dumps: Option<usize>,
    pub min_gap_ms: Option<usize>,
}

/// Sets [`ProfDumps`] (`profile::dump_on`); wins over the environment. False (nothing changed)
/// when the prefix does not fit.
#[cfg_attr(not(feature = "profiling"), allow(dead_code))]
pub(crate) fn set_prof_dumps(d: &ProfDumps<'_>) -> bool {
    let prefix = d.prefix;
    if prefix.is_empty() || prefix.len() > PROF_PREFIX_MAX || prefix.contains(&0) {
        return false;
    }
    load();
    keep_prefix(BY_SETTER, prefix);
    PROF_PEAK.set(d.peak_milli);
    PROF_SIGNAL.set(d.signal as usize);
    PROF_EVERY_S.set(d.every_s);
    if let Some(n) = d.max_dumps {
        PROF_MAX_DUMPS.set(n);
    }
    if let Some(ms) = d.min_gap_ms {
        PROF_MIN_GAP_MS.set(ms);
    }
    true
}

/// Applies settings fixed in code ([`Settings`](crate::Settings)): each one given wins over the
/// built-in default, not over the environment or a run-time setter.
pub(crate) fn apply_in_code(
    purge_delay_ms: Option<usize>,
    retained_chunks: Option<usize>,
    huge: Option<HugePages>,
    large: Option<LargeBlocks>,
    show_stats: Option<bool>,
    verbose: Option<bool>,
) {
    let set = |s: &Setting, v: Option<usize>| {
        if let Some(v) = v {
            s.set_from(IN_CODE, v);
        }
    };
    set(&PURGE_DELAY_MS, purge_delay_ms);
    set(&RETAINED_CHUNKS, retained_chunks);
    set(&HUGE_PAGES, huge.map(HugePages::raw));
    set(&LARGE_BLOCKS, large.map(|l| l as usize));
    set(&SHOW_STATS, show_stats.map(usize::from));
    set(&VERBOSE, verbose.map(usize::from));
}

/// Reports an anomaly on stderr when `POOLALLOC_VERBOSE` is on (once per kind is the caller's
/// business). Allocates nothing.
pub(crate) fn anomaly(args: fmt::Arguments<'_>) {
    if verbose() {
        say(args);
    }
}

/// Reads the environment once (the first call does; the others wait for it or return).
pub(crate) fn load() {
    static ONCE: spin::Once<()> = spin::Once::new();
    ONCE.call_once(read_env);
}

fn read_env() {
    if os::privileged() {
        return refuse_env();
    }
    os::for_each_env(&mut |entry| {
        let Some(rest) = ours(entry) else {
            return;
        };
        let eq = rest.iter().position(|&b| b == b'=').unwrap_or(rest.len());
        let (name, value) = (&rest[..eq], rest.get(eq + 1..).unwrap_or(b""));
        match ALL.iter().find(|s| s.name.as_bytes() == name) {
            Some(s) => s.take_from_env(value),
            None => say(format_args!(
                "unknown setting POOLALLOC_{} ignored (known: {Known})",
                Text(name)
            )),
        }
    });
    if VERBOSE.value.load(Relaxed) != 0 {
        print_all();
    }
}

/// The names of the settings, for the warning about an unknown one.
struct Known;

impl fmt::Display for Known {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(s.name)?;
        }
        Ok(())
    }
}

/// `POOLALLOC_VERBOSE`: every setting in force, one line each, with where its value came from.
fn print_all() {
    say(format_args!(
        "settings (backend {:?}), each with where its value came from:",
        os::BACKEND
    ));
    for s in ALL {
        say(format_args!(
            "  POOLALLOC_{}={} ({})",
            s.name,
            Shown(s.kind, s.value.load(Relaxed)),
            SOURCES[s.source.load(Relaxed) as usize]
        ));
    }
}

/// The part after `POOLALLOC_` of an environment entry that is one of our settings (names under
/// `POOLALLOC_TEST_` and `POOLALLOC_BENCH_` are reserved for poolalloc's own test and benchmark
/// harnesses, which read them themselves).
fn ours(entry: &[u8]) -> Option<&[u8]> {
    let rest = entry.strip_prefix(b"POOLALLOC_")?;
    (!rest.starts_with(b"TEST_") && !rest.starts_with(b"BENCH_")).then_some(rest)
}

/// In a privileged process (setuid, setgid, file capabilities: [`os::privileged`]) the
/// environment belongs to whoever started it, who may not be trusted with what the settings
/// steer (files written, memory kept, messages): every `POOLALLOC_*` is ignored, as glibc
/// ignores its `MALLOC_*` tunables there. Settings made in code still apply. One line on stderr
/// says so when any was set, naming none of their values.
fn refuse_env() {
    let mut seen = 0usize;
    os::for_each_env(&mut |entry| seen += ours(entry).is_some() as usize);
    if seen > 0 {
        say(format_args!(
            "{seen} POOLALLOC_* setting(s) ignored: the process is privileged (setuid, setgid or file capabilities)"
        ));
    }
}

/// The setting as it stands, without reading the environment (for messages while reading it).
fn large_blocks_raw() -> LargeBlocks {
    LargeBlocks::from_usize(LARGE_BLOCKS.value.load(Relaxed))
}

/// A whole number `0..=max`, in decimal.
fn parse_number(v: &[u8], max: usize) -> Option<usize> {
    if v.is_empty() || v.len() > 20 {
        return None;
    }
    let mut n: usize = 0;
    for &d in v {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add((d - b'0') as usize)?;
    }
    (n <= max).then_some(n)
}

fn parse_bool(v: &[u8]) -> Option<bool> {
    match v {
        b"1" | b"true" | b"yes" | b"on" => Some(true),
        b"0" | b"false" | b"no" | b"off" | b"" => Some(false),
        _ => None,
    }
}

/// `D[.DDD]` in thousandths: `1.5` is 1500. None for anything else.
fn parse_milli(v: &[u8]) -> Option<usize> {
    let dot = v.iter().position(|&b| b == b'.').unwrap_or(v.len());
    let (int, frac) = (&v[..dot], v.get(dot + 1..).unwrap_or(b""));
    if int.is_empty() || frac.len() > 3 || (dot < v.len() && frac.is_empty()) {
        return None;
    }
    let whole = parse_number(int, usize::MAX / 1000 - 1)?;
    let mut milli = 0;
    for (i, &d) in frac.iter().enumerate() {
        if !d.is_ascii_digit() {
            return None;
        }
        milli += (d - b'0') as usize * [100, 10, 1][i];
    }
    Some(whole * 1000 + milli)
}

/// Bytes shown as text (non-UTF-8 bytes as `?`), at most 64 of them.
struct Text<'a>(&'a [u8]);

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.0.iter().take(64) {
            f.write_char(if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '?'
            })?;
        }
        if self.0.len() > 64 {
            f.write_str("…")?;
        }
        Ok(())
    }
}

/// Writes `poolalloc: <message>` as one line on stderr, without allocating (a longer message is
/// cut, its newline kept).
pub(crate) fn say(args: fmt::Arguments<'_>) {
    os::write_stderr(StackText::<320>::message(args).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_parse_within_bounds_only() {
        assert_eq!(parse_number(b"0", 10), Some(0));
        assert_eq!(parse_number(b"250", 1000), Some(250));
        assert_eq!(parse_number(b"1001", 1000), None);
        assert_eq!(parse_number(b"", 10), None);
        assert_eq!(parse_number(b"-1", 10), None);
        assert_eq!(parse_number(b"12ms", 100), None);
        assert_eq!(parse_number(b"99999999999999999999999", usize::MAX), None);
    }

    #[test]
    fn factors_parse_in_thousandths() {
        assert_eq!(parse_milli(b"1.5"), Some(1500));
        assert_eq!(parse_milli(b"2"), Some(2000));
        assert_eq!(parse_milli(b"1.125"), Some(1125));
        assert_eq!(parse_milli(b"1.05"), Some(1050));
        assert_eq!(parse_milli(b"1."), None);
        assert_eq!(parse_milli(b".5"), None);
        assert_eq!(parse_milli(b"1.2345"), None);
        assert_eq!(parse_milli(b"1,5"), None);
        assert_eq!(parse_milli(b"x"), None);
    }

    #[test]
    fn booleans_parse() {
        assert_eq!(parse_bool(b"1"), Some(true));
        assert_eq!(parse_bool(b"on"), Some(true));
        assert_eq!(parse_bool(b"off"), Some(false));
        assert_eq!(parse_bool(b"maybe"), None);
    }

    /// A setter called at run time (`set_purge_delay` & co.) wins over the environment, whichever
    /// comes first; the environment wins over the default. (Settings fixed in code rank below the
    /// environment: the next test.)
    #[test]
    fn a_setter_wins_over_the_environment_whichever_comes_first() {
        let s = scratch(5);
        s.set_from_env(7);
        assert_eq!(s.value.load(Relaxed), 7, "the environment over the default");
        s.set(9);
        assert_eq!(s.value.load(Relaxed), 9, "a setter after the environment");
        s.set_from_env(11);
        assert_eq!(s.value.load(Relaxed), 9, "the environment after a setter");
    }

    #[test]
    fn the_environment_wins_over_settings_in_code_whichever_comes_first() {
        let s = scratch(5);
        s.set_from(IN_CODE, 6);
        assert_eq!(s.value.load(Relaxed), 6);
        s.set_from_env(7);
        s.set_from(IN_CODE, 8);
        assert_eq!(s.value.load(Relaxed), 7);
        s.set(9);
        s.set_from(IN_CODE, 10);
        s.set_from_env(11);
        assert_eq!(s.value.load(Relaxed), 9);
    }

    /// Every value passes its kind's bounds, whatever its source: refused from the environment,
    /// taken at the nearest bound from code (issue 41: a purge delay of 2^32 ms from a setter
    /// was held as is, and the purger truncated it to 0).
    #[test]
    fn every_source_passes_the_bounds() {
        let kinds = [
            (Kind::Number { max: 1000 }, 1001, 1000),
            // 2^32 ms where a usize holds it (64-bit targets), else the largest usize: past the
            // bound either way.
            (
                Kind::Number { max: MAX_DELAY_MS },
                usize::try_from(1u64 << 32).unwrap_or(usize::MAX),
                MAX_DELAY_MS,
            ),
            (Kind::Switch, 2, 1),
            (Kind::Factor, 1000, 1001),
            (Kind::Factor, MAX_PROF_PEAK_MILLI + 1, MAX_PROF_PEAK_MILLI),
            (Kind::Prefix, PROF_PREFIX_MAX + 1, PROF_PREFIX_MAX),
            (Kind::Large, 3, 2),
            (Kind::Huge, usize::MAX - 1, MAX_HUGE_MIB),
        ];
        for (kind, out, nearest) in kinds {
            assert_eq!(kind.bound(out), Err(nearest));
            assert_eq!(kind.bound(nearest), Ok(nearest));
            let s = scratch(0);
            let s = Setting { kind, ..s };
            assert!(!s.set_from_env(out));
            assert_eq!(s.value.load(Relaxed), 0);
            assert!(s.set_from(IN_CODE, out));
            assert_eq!(s.value.load(Relaxed), nearest);
            s.set(out);
            assert_eq!(s.value.load(Relaxed), nearest);
        }
        assert_eq!(Kind::Huge.bound(HugePages::Off.raw()), Ok(usize::MAX));
        assert_eq!(Kind::Factor.bound(0), Ok(0));
        for s in ALL {
            assert_eq!(s.kind.bound(s.default), Ok(s.default), "{}", s.name);
        }
    }

    /// [`Setting::set_from`] is the one writer of a setting's value, so no source skips the
    /// bounds: this file stores a value nowhere else.
    #[test]
    fn values_are_stored_in_one_place() {
        let code = include_str!("settings.rs");
        let store = [".value", ".store("].concat();
        assert_eq!(code.matches(&store).count(), 1);
    }

    /// A setting of no table, for the precedence tests.
    fn scratch(default: usize) -> Setting {
        Setting {
            name: "SCRATCH",
            kind: Kind::Number { max: usize::MAX },
            default,
            default_doc: None,
            rust: "",
            doc: "",
            value: AtomicUsize::new(default),
            source: AtomicU8::new(DEFAULT),
        }
    }

    fn shown(kind: Kind, v: usize) -> String {
        format!("{}", Shown(kind, v))
    }

    #[test]
    fn every_value_shown_parses_back() {
        let kinds = [
            (Kind::Number { max: 1000 }, &[0, 7, 1000][..]),
            (Kind::Switch, &[0, 1]),
            (
                Kind::Factor,
                &[0, 1001, 1050, 1500, 2000, 1125, MAX_PROF_PEAK_MILLI],
            ),
            (Kind::Large, &[0, 1, 2]),
            (Kind::Huge, &[usize::MAX, 0, 32, MAX_HUGE_MIB]),
        ];
        for (kind, values) in kinds {
            for &v in values {
                let s = shown(kind, v);
                assert_eq!(kind.parse(s.as_bytes()), Some(v), "{s}");
            }
        }
        assert_eq!(shown(Kind::Factor, 1500), "1.5");
        assert_eq!(shown(Kind::Factor, 1050), "1.05");
        for s in ALL.iter().filter(|s| !matches!(s.kind, Kind::Prefix)) {
            let d = shown(s.kind, s.default);
            assert_eq!(s.kind.parse(d.as_bytes()), Some(s.default), "{}", s.name);
        }
    }

    #[test]
    fn names_are_distinct_and_each_line_fits_a_message() {
        for (i, s) in ALL.iter().enumerate() {
            assert!(ALL[..i].iter().all(|t| t.name != s.name), "{}", s.name);
        }
        assert_eq!(ALL.len(), 14);
        // The longest warning: an unknown name of 64 bytes and every known name.
        let line = format!(
            "unknown setting POOLALLOC_{} ignored (known: {Known})",
            "X".repeat(64)
        );
        assert!(line.len() + "poolalloc: \n".len() <= 320, "{}", line.len());
    }

    /// `docs/stats-and-settings.md` shows the table as [`write_docs_table`] writes it, and says
    /// how many settings there are in words no test reads: so the test reads the table.
    #[test]
    fn the_docs_page_shows_the_table() {
        let page = include_str!("../../docs/stats-and-settings.md");
        let mut want = String::new();
        write_docs_table(&mut want).unwrap();
        let start = page
            .find("| variable | Rust | default | what |")
            .expect("docs/stats-and-settings.md has no table of settings");
        let end = page[start..]
            .find("\n\n")
            .map_or(page.len(), |e| start + e + 1);
        assert!(
            page[start..end] == want,
            "docs/stats-and-settings.md's table of settings differs from the one in \
             src/base/settings.rs; it should read:\n{want}"
        );
    }
}
