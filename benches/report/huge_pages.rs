//! The share of a child's memory in transparent huge pages, the same measure for every allocator:
//! `AnonHugePages` over `Anonymous` in `/proc/self/smaps_rollup`, read near the child's peak RSS;
//! for poolalloc also its own count (`Stats::huge_page_share`, the chunk memory in advised units).
//! And the machine's THP mode, for the report's header.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// One reading of `/proc/self/smaps_rollup` (bytes), with poolalloc's own share where it serves
/// the child.
#[derive(Clone, Copy, Default)]
pub struct Reading {
    pub rss: usize,
    pub anon: usize,
    pub huge: usize,
    pub own_share: Option<f64>,
}

/// Reads a small /proc file into `buf` without allocating (the watcher runs beside the workload,
/// in the allocator being measured): the text read, empty if the file cannot be read.
fn read_small<'a>(path: &str, buf: &'a mut [u8]) -> &'a str {
    let Ok(mut f) = std::fs::File::open(path) else {
        return "";
    };
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    std::str::from_utf8(&buf[..n]).unwrap_or("")
}

/// The resident set in bytes, from `/proc/self/statm` (cheap: no page-table walk).
fn rss() -> usize {
    let mut buf = [0u8; 128];
    let pages: usize = read_small("/proc/self/statm", &mut buf)
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
}

/// `Rss`, `Anonymous` and `AnonHugePages` of every mapping of this process. The kernel walks the
/// page tables for it (its cost grows with the RSS), so the watcher reads it only as RSS grows.
fn rollup(own: bool) -> Reading {
    let mut buf = [0u8; 2048];
    let text = read_small("/proc/self/smaps_rollup", &mut buf);
    let field = |name: &str| -> usize {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<usize>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    Reading {
        rss: field("Rss"),
        anon: field("Anonymous"),
        huge: field("AnonHugePages"),
        own_share: own.then(|| poolalloc::stats().huge_page_share()),
    }
}

/// Watches the child's RSS every 10 ms and reads `smaps_rollup` each time the RSS has grown by a
/// quarter since the last reading, keeping the reading with the largest RSS: so the share is
/// taken within a quarter of the peak, at no more than a handful of page-table walks a run.
pub struct Watch {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Reading>,
    own: bool,
}

impl Watch {
    /// `own`: poolalloc serves this child, so its own count is read too.
    pub fn start(own: bool) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut best = Reading::default();
            let mut next = 0;
            while !s.load(Ordering::Relaxed) {
                let now = rss();
                if now >= next {
                    let r = rollup(own);
                    if r.rss >= best.rss {
                        best = r;
                    }
                    next = now + now / 4;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            best
        });
        Watch { stop, handle, own }
    }

    /// The reading at the largest RSS seen, one more taken now if the RSS is larger still (a
    /// workload shorter than the 10 ms interval).
    pub fn finish(self) -> Reading {
        self.stop.store(true, Ordering::Relaxed);
        let best = self.handle.join().unwrap_or_default();
        if rss() > best.rss {
            let r = rollup(self.own);
            if r.rss > best.rss {
                return r;
            }
        }
        best
    }
}

/// The machine's THP mode: `enabled` and `defrag` of `/sys/kernel/mm/transparent_hugepage/`, the
/// words in brackets ("unknown" where there is no such file).
pub fn thp_mode() -> String {
    let word = |name: &str| {
        std::fs::read_to_string(format!("/sys/kernel/mm/transparent_hugepage/{name}"))
            .ok()
            .and_then(|s| {
                let a = s.find('[')?;
                let b = s[a..].find(']')?;
                Some(s[a + 1..a + b].to_string())
            })
            .unwrap_or_else(|| "unknown".into())
    };
    format!(
        "transparent huge pages `enabled={}`, `defrag={}`",
        word("enabled"),
        word("defrag")
    )
}
