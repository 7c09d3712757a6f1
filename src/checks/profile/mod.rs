//! A sampling heap profiler (feature `profiling`): which call stacks hold the live memory, and
//! which allocated the most, at a cost low enough to leave on.
//!
//! ```no_run
//! # #[global_allocator]
//! # static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
//! poolalloc::profile::start(poolalloc::profile::Config::default()).unwrap();
//! // ... the program runs ...
//! poolalloc::profile::dump("heap.pb.gz").unwrap(); // go tool pprof -top heap.pb.gz
//! ```
//!
//! One allocation per [`Config::interval`] bytes on average is sampled (TCMalloc's scheme: see
//! `sampler.rs`); a sampled block records its stack, size and weight in tables the profiler maps
//! itself (`table.rs`), and loses its record when it is freed. [`dump`] writes every stack with
//! its estimated live blocks and bytes (`inuse_objects`, `inuse_space`) and what it allocated
//! since [`start`] (`alloc_objects`, `alloc_space`), in pprof's format (`pprof.rs`), symbolized
//! then, and [`flamegraph`] draws the live bytes by stack as an SVG. Recording never allocates;
//! dumping does.
//!
//! Runs on 64-bit Linux, macOS and FreeBSD; elsewhere [`start`] returns [`Error::Unsupported`].

// Where it records (`cfg(poolalloc_profiled)`, set by build.rs): 64-bit Linux, macOS and FreeBSD,
// whose plain `thread_local!` never allocates. Elsewhere the data path calls the twins in
// `checks/mod.rs` and the functions below say `Unsupported`.
#[cfg(poolalloc_profiled)]
mod flamegraph;
#[cfg(poolalloc_profiled)]
mod on_demand;
#[cfg(poolalloc_profiled)]
mod pprof;
#[cfg(poolalloc_profiled)]
mod sampler;
#[cfg(poolalloc_profiled)]
mod table;
/// The data path's calls (through `checks`), and the profiler's lock for `fork`.
#[cfg(poolalloc_profiled)]
pub(crate) use {
    sampler::{armed, on_alloc, on_free},
    table::{lock_for_fork, unlock_after_fork},
};

use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

/// How the profiler samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The mean number of bytes allocated between two samples (default 512 KiB); 0 samples every
    /// allocation (exact, and slow).
    pub interval: usize,
    /// Seed of the sampling decisions (0: a random one). A fixed seed repeats the samples of a
    /// deterministic single-threaded program exactly.
    pub seed: u64,
}

/// The default mean interval between samples: 512 KiB, TCMalloc's.
pub const DEFAULT_INTERVAL: usize = 512 * 1024;

impl Default for Config {
    fn default() -> Self {
        Config {
            interval: DEFAULT_INTERVAL,
            seed: 0,
        }
    }
}

/// Why the profiler cannot do what was asked.
#[derive(Debug)]
pub enum Error {
    /// No profiler on this platform (it runs on 64-bit Linux, macOS and FreeBSD).
    Unsupported,
    /// Writing the file failed.
    Io(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unsupported => {
                f.write_str("poolalloc's profiler runs on 64-bit Linux, macOS and FreeBSD only")
            }
            Error::Io(e) => write!(f, "writing the profile: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

/// Starts sampling (again, with a new configuration, if it runs). The calling thread samples
/// from its next allocation on, other threads within 64 KiB of their allocations. Records of
/// an earlier run stay (their blocks are still live).
pub fn start(config: Config) -> Result<(), Error> {
    #[cfg(poolalloc_profiled)]
    {
        sampler::start(config.interval, config.seed);
        Ok(())
    }
    #[cfg(not(poolalloc_profiled))]
    {
        let _ = config;
        Err(Error::Unsupported)
    }
}

/// Stops sampling. The records of live sampled blocks stay (and still leave when their blocks
/// are freed), so a later [`dump`] still shows them.
pub fn stop() {
    #[cfg(poolalloc_profiled)]
    sampler::stop();
}

/// Whether the profiler samples now.
pub fn running() -> bool {
    #[cfg(poolalloc_profiled)]
    {
        sampler::running()
    }
    #[cfg(not(poolalloc_profiled))]
    {
        false
    }
}

/// Writes the profile to `path` in pprof's format (gzipped profile.proto), symbolized; read it
/// with `go tool pprof` (or `pprof`), e.g. `go tool pprof -top -sample_index=inuse_space path`.
/// Allocates (nothing it allocates is sampled).
///
/// The path is the caller's choice and is opened as `File::create` opens it (an existing file is
/// replaced). The profiles the profiler writes by itself, at exit and on demand, are only ever
/// created new (see [`Dumps`]).
pub fn dump(path: impl AsRef<Path>) -> Result<(), Error> {
    write_gz(|| std::fs::File::create(path))
}

/// Writes the profile to `path`, a file created new: see [`create_new`].
pub(crate) fn dump_new(path: impl AsRef<Path>) -> Result<(), Error> {
    write_gz(|| create_new(path.as_ref()))
}

/// Encodes the profile, then opens the file (nothing is created when there is no profile).
fn write_gz(open: impl FnOnce() -> io::Result<std::fs::File>) -> Result<(), Error> {
    let bytes = encode()?;
    gzip_to(&bytes, open()?)
}

/// Writes `bytes` (an encoded profile) gzipped to `file`.
fn gzip_to(bytes: &[u8], file: std::fs::File) -> Result<(), Error> {
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    gz.write_all(bytes)?;
    gz.finish()?;
    Ok(())
}

/// Opens `path` for a file the allocator writes by itself (its path built from a prefix the
/// environment or `dump_on` gave): created new or not at all (`O_CREAT | O_EXCL`, which refuses a
/// symbolic link at the path, dangling or not, so a link planted where the next profile goes is
/// never followed, and an existing file is never truncated), readable by its owner only (mode
/// 0600 on Unix: a heap profile shows the program's call stacks and sizes).
fn create_new(path: &Path) -> io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o.open(path)
}

/// When the profiler writes profiles by itself, besides [`dump`] calls and the exit dump of
/// `POOLALLOC_PROF`: each one is `<prefix>.<pid>.<seq>.pb.gz`, `seq` counting from 1 in the
/// process. The environment says the same with `POOLALLOC_PROF` (the prefix, and the profiler
/// started at start-up), `POOLALLOC_PROF_PEAK`, `POOLALLOC_PROF_SIGNAL`,
/// `POOLALLOC_PROF_EVERY_S`, `POOLALLOC_PROF_MAX_DUMPS` and `POOLALLOC_PROF_MIN_GAP_MS`;
/// [`dump_on`] wins over it.
///
/// Each file is created new, readable by its owner only: a file or a symbolic link already at
/// the path is left as it is (never followed, never truncated), and the profile takes the next
/// number whose name is free (up to 64 names a profile; a line on stderr when all were taken).
/// The exit dump (`<prefix>.<pid>.pb.gz`) is created the same way, and not written when its name
/// is taken (one line on stderr says so).
///
/// Whoever may signal the process, or a program that sets a short period, must not fill its
/// disk: a process writes at most [`max_dumps`](Dumps::max_dumps) numbered profiles (100 by
/// default), at least [`min_gap`](Dumps::min_gap) apart (1 s by default; a profile due sooner
/// waits for it, and signals meanwhile make one profile).
///
/// A thread of the profiler's own (`poolalloc-prof`) looks every 50 ms and writes what is due, so
/// nothing is written in an allocating thread or in a signal handler; a peak that lasts less than
/// that can be missed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dumps {
    /// The path prefix of the files.
    pub prefix: String,
    /// A dump each time the profile's live bytes (its estimate, `inuse_space`) reach this factor
    /// (above 1, to a thousandth) times those at the last such dump; the first at this factor
    /// times 1 MiB. `None`: never.
    pub peak_factor: Option<f64>,
    /// A dump when the process receives `SIGUSR2` (Unix; refused if the program handles that
    /// signal itself).
    pub on_signal: bool,
    /// A dump every period (whole seconds, at least one, at most a week: a longer period is
    /// taken as a week). `None`: never.
    pub every: Option<Duration>,
    /// The most numbered profiles the process writes, counted from its start; past it, one line
    /// on stderr and no more. `None`: the setting in force (`POOLALLOC_PROF_MAX_DUMPS`, default
    /// 100). At most 1 000 000.
    pub max_dumps: Option<usize>,
    /// The least time between two numbered profiles, to the millisecond; one due sooner waits
    /// for it. `None`: the setting in force (`POOLALLOC_PROF_MIN_GAP_MS`, default 1 s). At most
    /// a day.
    pub min_gap: Option<Duration>,
}

/// Makes the profiler write profiles by itself when `d` says (see [`Dumps`]), from now on, in
/// place of what was set before or by the environment. It writes what the sampling recorded: start
/// it ([`start`]) for the profiles to hold anything. Errors: [`Error::Unsupported`] where there is
/// no profiler; [`Error::Io`] (`InvalidInput`) for a prefix that is empty or longer than 480 bytes,
/// a factor not above 1, or a signal the program handles itself (the other dumps are set anyway).
pub fn dump_on(d: &Dumps) -> Result<(), Error> {
    #[cfg(poolalloc_profiled)]
    {
        let invalid = |what: &str| Error::Io(io::Error::new(io::ErrorKind::InvalidInput, what));
        let peak = match d.peak_factor {
            None => 0,
            Some(f) if f > 1.0 && f <= 1000.0 => (f * 1000.0).round() as usize,
            Some(_) => {
                return Err(invalid(
                    "the peak factor must be above 1 (and at most 1000)",
                ));
            }
        };
        // Saturating: the settings take what is past their bounds at the bound.
        let sat = |v: u128| usize::try_from(v).unwrap_or(usize::MAX);
        let set = crate::base::settings::ProfDumps {
            prefix: d.prefix.as_bytes(),
            peak_milli: peak,
            signal: d.on_signal,
            every_s: d.every.map_or(0, |p| sat(p.as_secs().max(1).into())),
            max_dumps: d.max_dumps,
            min_gap_ms: d.min_gap.map(|g| sat(g.as_millis())),
        };
        if !crate::base::settings::set_prof_dumps(&set) {
            return Err(invalid("the prefix must be 1 to 480 bytes, without NUL"));
        }
        if !on_demand::arm() {
            return Err(invalid(
                "SIGUSR2 is handled by the program, or the dump thread did not start",
            ));
        }
        Ok(())
    }
    #[cfg(not(poolalloc_profiled))]
    {
        let _ = d;
        Err(Error::Unsupported)
    }
}

/// How many profiles [`dump_on`] (or the environment's `POOLALLOC_PROF_PEAK`, `_SIGNAL`,
/// `_EVERY_S`) had the profiler write so far; the last one is `<prefix>.<pid>.<this>.pb.gz`,
/// or a higher number where names were taken already (see [`Dumps`]).
pub fn dumps_written() -> usize {
    #[cfg(poolalloc_profiled)]
    {
        on_demand::written()
    }
    #[cfg(not(poolalloc_profiled))]
    {
        0
    }
}

/// Writes a flamegraph (SVG, `inferno`) of the live bytes by stack to `path`, symbolized like
/// [`dump`]'s profile. Allocates (nothing it allocates is sampled).
pub fn flamegraph(path: impl AsRef<Path>) -> Result<(), Error> {
    #[cfg(poolalloc_profiled)]
    {
        let lines = {
            let _busy = sampler::Busy::enter();
            flamegraph::folded(&table::snapshot())
        };
        let file = io::BufWriter::new(std::fs::File::create(path)?);
        flamegraph::write_svg(&lines, file)?;
        Ok(())
    }
    #[cfg(not(poolalloc_profiled))]
    {
        let _ = path;
        Err(Error::Unsupported)
    }
}

/// The profile as an uncompressed profile.proto message.
fn encode() -> Result<Vec<u8>, Error> {
    #[cfg(poolalloc_profiled)]
    {
        let _busy = sampler::Busy::enter();
        let snap = table::snapshot();
        Ok(pprof::encode(&snap, sampler::interval()))
    }
    #[cfg(not(poolalloc_profiled))]
    {
        Err(Error::Unsupported)
    }
}

/// `POOLALLOC_PROF` (and `POOLALLOC_PROF_INTERVAL`): starts the profiler at start-up; true when
/// it did (then [`dump_at_exit`] writes the profile). Allocates nothing.
pub(crate) fn start_from_env() -> bool {
    let mut prefix = [0u8; crate::base::settings::PROF_PREFIX_MAX];
    if crate::base::settings::prof_prefix(&mut prefix) == 0 {
        return false;
    }
    let config = Config {
        interval: crate::base::settings::prof_interval(),
        seed: 0,
    };
    match start(config) {
        Ok(()) => {
            #[cfg(poolalloc_profiled)]
            on_demand::arm();
            true
        }
        Err(e) => {
            crate::base::settings::say(format_args!("POOLALLOC_PROF ignored: {e}"));
            false
        }
    }
}

/// Writes `<POOLALLOC_PROF>.<pid>.pb.gz` (at exit); a failure is one line on stderr.
pub(crate) fn dump_at_exit() {
    let mut prefix = [0u8; crate::base::settings::PROF_PREFIX_MAX];
    let n = crate::base::settings::prof_prefix(&mut prefix);
    if n == 0 {
        return;
    }
    let mut path = String::from_utf8_lossy(&prefix[..n]).into_owned();
    path.push_str(&format!(".{}.pb.gz", std::process::id()));
    if let Err(e) = dump_new(&path) {
        crate::base::settings::say(format_args!("profile not written to {path}: {e}"));
    }
}
