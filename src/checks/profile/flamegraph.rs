//! The flamegraph: live bytes by stack as an SVG (`inferno`), symbolized like the pprof file
//! (the same resolution and the same trimming of the allocator's own frames, `pprof.rs`).

use super::pprof::{is_allocator_location, resolve};
use super::table::Snapshot;
use std::collections::HashMap;
use std::io;

/// The snapshot's live bytes by stack, in the folded format (`outermost;...;innermost bytes`).
pub fn folded(snap: &Snapshot) -> Vec<String> {
    let mut live: HashMap<u32, f64> = HashMap::new();
    for r in &snap.records {
        *live.entry(r.stack).or_default() += r.weight * r.size as f64;
    }
    let mut names: HashMap<usize, Vec<String>> = HashMap::new();
    let mut lines = Vec::new();
    for (entry, s) in &snap.stacks {
        let Some(&bytes) = live.get(entry) else {
            continue;
        };
        let mut frames: Vec<String> = Vec::new();
        for &ip in &s.frames[..s.depth as usize] {
            let fs = names
                .entry(ip)
                .or_insert_with(|| resolve(ip).into_iter().map(|f| f.name).collect());
            if frames.is_empty() && is_allocator_location(fs.iter().map(String::as_str)) {
                continue;
            }
            frames.extend(fs.iter().cloned());
        }
        if frames.is_empty() {
            frames.push("[allocator]".to_owned());
        }
        frames.reverse();
        // The folded format splits on ';' and the last space.
        let stack: Vec<String> = frames.iter().map(|f| f.replace([';', ' '], "_")).collect();
        lines.push(format!("{} {}", stack.join(";"), bytes.round() as u64));
    }
    lines.sort();
    lines
}

/// Writes the SVG of `lines` (folded) to `out`.
pub fn write_svg(lines: &[String], out: impl io::Write) -> io::Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = "poolalloc: live bytes by stack".to_owned();
    opts.count_name = "bytes".to_owned();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
        .map_err(io::Error::other)
}
