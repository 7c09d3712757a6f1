//! Renderings of a [`Stats`] snapshot for machines: JSON ([`Stats::json`]) and the Prometheus
//! text exposition format ([`Stats::prometheus`]).
//!
//! Both are written by hand through `core::fmt`, with no dependency and without allocating, so
//! they can run where the allocator cannot be called (the exit report, a signal-safe dump into a
//! stack buffer). A `serde` feature was weighed and not taken: it would add a dependency to the
//! allocator crate for one flat struct, and serialising through it allocates in most formats.
//! The JSON object's keys are the field names of [`Stats`] and [`ClassStats`]; a new counter adds
//! a key, an existing key keeps its meaning.

use crate::api::stats::{ClassStats, Stats};
use core::fmt;

impl Stats {
    /// The snapshot as one JSON object (no trailing newline): every field of `Stats` by its
    /// name, `rss_bytes` `null` where the OS does not report it, `requested_bytes` (whole and per
    /// class) `null` where it is not known (`requested_known`), `backend` a string, and
    /// `classes` an array of every size class's [`ClassStats`] (with its `live_bytes`).
    ///
    /// ```
    /// let text = poolalloc::stats().json().to_string();
    /// assert!(text.starts_with('{') && text.contains("\"live_bytes\":"));
    /// ```
    pub fn json(&self) -> impl fmt::Display + '_ {
        Json(self)
    }

    /// The snapshot in the Prometheus text exposition format (version 0.0.4), metric names
    /// prefixed `poolalloc_`: gauges for what is held now, counters (`_total`) for the cumulative
    /// figures, and per size class, labelled `slot_size`, its live slots, chunks and allocations.
    /// Serve it with `Content-Type: text/plain; version=0.0.4` (`examples/prometheus_exporter`).
    pub fn prometheus(&self) -> impl fmt::Display + '_ {
        Prometheus(self)
    }
}

struct Json<'a>(&'a Stats);

impl fmt::Display for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        write!(f, "{{\"backend\":\"{:?}\"", s.backend)?;
        for (k, v) in totals(s) {
            if k == "requested_bytes" && !s.requested_known {
                f.write_str(",\"requested_bytes\":null")?;
            } else {
                write!(f, ",\"{k}\":{v}")?;
            }
        }
        write!(f, ",\"requested_known\":{}", s.requested_known)?;
        match s.rss_bytes {
            Some(r) => write!(f, ",\"rss_bytes\":{r}")?,
            None => f.write_str(",\"rss_bytes\":null")?,
        }
        f.write_str(",\"classes\":[")?;
        for (i, c) in s.classes.iter().enumerate() {
            f.write_str(if i == 0 { "{" } else { ",{" })?;
            for (j, (k, v)) in class_fields(c).into_iter().enumerate() {
                let sep = if j == 0 { "" } else { "," };
                if k == "requested_bytes" && !s.requested_known {
                    write!(f, "{sep}\"{k}\":null")?;
                } else {
                    write!(f, "{sep}\"{k}\":{v}")?;
                }
            }
            f.write_str("}")?;
        }
        f.write_str("]}")
    }
}

/// The whole-process figures, by field name.
fn totals(s: &Stats) -> [(&'static str, usize); 15] {
    [
        ("chunks", s.chunks),
        ("reserved_bytes", s.reserved_bytes),
        ("live_bytes", s.live_bytes),
        ("requested_bytes", s.requested_bytes),
        ("cached_bytes", s.cached_bytes),
        ("large_blocks", s.large_blocks),
        ("large_bytes", s.large_bytes),
        ("allocations", s.allocations),
        ("frees", s.frees),
        ("allocated_bytes", s.allocated_bytes),
        ("peak_reserved_bytes", s.peak_reserved_bytes),
        ("chunks_mapped", s.chunks_mapped),
        ("chunks_purged", s.chunks_purged),
        ("huge_page_bytes", s.huge_page_bytes),
        ("live_blocks", s.live_blocks()),
    ]
}

/// One class's figures, by field name.
fn class_fields(c: &ClassStats) -> [(&'static str, usize); 11] {
    [
        ("slot_size", c.slot_size),
        ("chunks", c.chunks),
        ("live_slots", c.live_slots),
        ("live_bytes", c.live_bytes()),
        ("cached_slots", c.cached_slots),
        ("free_slots", c.free_slots),
        ("reserved_bytes", c.reserved_bytes),
        ("requested_bytes", c.requested_bytes),
        ("retained_chunks", c.retained_chunks),
        ("abandoned_chunks", c.abandoned_chunks),
        ("allocations", c.allocations),
    ]
}

struct Prometheus<'a>(&'a Stats);

/// (name without the prefix, type, help, value) of each whole-process metric.
fn metrics(s: &Stats) -> [(&'static str, &'static str, &'static str, usize); 13] {
    [
        (
            "chunks",
            "gauge",
            "Chunks held by the pools (in use or retained empty).",
            s.chunks,
        ),
        (
            "reserved_bytes",
            "gauge",
            "Bytes of address space held in chunks.",
            s.reserved_bytes,
        ),
        (
            "live_bytes",
            "gauge",
            "Bytes of slots holding live small blocks.",
            s.live_bytes,
        ),
        (
            "requested_bytes",
            "gauge",
            "Bytes requested by live small blocks.",
            s.requested_bytes,
        ),
        (
            "cached_bytes",
            "gauge",
            "Bytes of slots freed by other threads, not yet collected.",
            s.cached_bytes,
        ),
        (
            "large_blocks",
            "gauge",
            "Live large blocks.",
            s.large_blocks,
        ),
        (
            "large_bytes",
            "gauge",
            "Bytes of live large blocks.",
            s.large_bytes,
        ),
        (
            "peak_reserved_bytes",
            "gauge",
            "Most bytes held in chunks at once since start.",
            s.peak_reserved_bytes,
        ),
        (
            "allocations_total",
            "counter",
            "Blocks allocated since start (small ones counted per batch supplied to a thread; see Stats::allocations).",
            s.allocations,
        ),
        (
            "frees_total",
            "counter",
            "Blocks freed since start (see Stats::frees).",
            s.frees,
        ),
        (
            "allocated_bytes_total",
            "counter",
            "Bytes allocated since start (slot bytes for small blocks).",
            s.allocated_bytes,
        ),
        (
            "chunks_mapped_total",
            "counter",
            "Chunks mapped from the OS since start.",
            s.chunks_mapped,
        ),
        (
            "chunks_purged_total",
            "counter",
            "Chunks whose pages went back to the OS since start.",
            s.chunks_purged,
        ),
    ]
}

impl fmt::Display for Prometheus<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        for (name, kind, help, v) in metrics(s) {
            if name == "requested_bytes" && !s.requested_known {
                continue; // not known: no sample rather than a false one
            }
            writeln!(f, "# HELP poolalloc_{name} {help}")?;
            writeln!(f, "# TYPE poolalloc_{name} {kind}")?;
            writeln!(f, "poolalloc_{name} {v}")?;
        }
        if let Some(r) = s.rss_bytes {
            f.write_str("# HELP poolalloc_rss_bytes Resident set size of the process.\n")?;
            f.write_str("# TYPE poolalloc_rss_bytes gauge\n")?;
            writeln!(f, "poolalloc_rss_bytes {r}")?;
        }
        type Field = fn(&ClassStats) -> usize;
        let per_class: [(&str, &str, &str, Field); 3] = [
            (
                "class_live_slots",
                "gauge",
                "Slots holding live blocks, per size class.",
                |c| c.live_slots,
            ),
            ("class_chunks", "gauge", "Chunks of the size class.", |c| {
                c.chunks
            }),
            (
                "class_allocations_total",
                "counter",
                "Slots of the size class supplied to threads since start.",
                |c| c.allocations,
            ),
        ];
        for (name, kind, help, get) in per_class {
            writeln!(f, "# HELP poolalloc_{name} {help}")?;
            writeln!(f, "# TYPE poolalloc_{name} {kind}")?;
            for c in &s.classes {
                writeln!(
                    f,
                    "poolalloc_{name}{{slot_size=\"{}\"}} {}",
                    c.slot_size,
                    get(c)
                )?;
            }
        }
        Ok(())
    }
}
