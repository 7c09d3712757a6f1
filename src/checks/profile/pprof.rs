//! The pprof file: profile.proto (github.com/google/pprof, `proto/profile.proto`), gzipped.
//!
//! The encoder is written here rather than generated (prost and its derive): the format needs only
//! varints and length-delimited fields, five message kinds, and this keeps the feature's build to
//! two small crates (`backtrace`, `flate2`). Field numbers are those of profile.proto.
//!
//! Symbolization happens here, at dump time (it allocates): every distinct return address becomes
//! one location, with one line per function inlined there, innermost first, as pprof expects.

use super::table::{Snapshot, Stack};
use std::collections::HashMap;

/// A protobuf message being written.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn key(&mut self, field: u32, wire: u32) {
        self.varint(((field as u64) << 3) | wire as u64);
    }
    /// An integer field (int64, uint64, bool); zero is the default and is left out.
    fn int(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, 0);
            self.varint(v);
        }
    }
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn msg(&mut self, field: u32, m: Msg) {
        self.bytes(field, &m.0);
    }
    /// A packed repeated integer field.
    fn packed(&mut self, field: u32, vs: impl IntoIterator<Item = u64>) {
        let mut m = Msg::default();
        for v in vs {
            m.varint(v);
        }
        self.bytes(field, &m.0);
    }
}

/// The string table: index 0 is "".
struct Strings {
    list: Vec<String>,
    index: HashMap<String, u64>,
}

impl Strings {
    fn new() -> Self {
        Strings {
            list: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
        }
    }
    fn id(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len() as u64;
        self.list.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }
}

/// One function a location's address resolves to.
pub(super) struct Frame {
    pub name: String,
    pub file: String,
    pub line: u32,
}

/// The functions at return address `ip`, innermost (inlined) first.
pub(super) fn resolve(ip: usize) -> Vec<Frame> {
    let mut out = Vec::new();
    // A return address: the call is the instruction before it.
    let at = ip.saturating_sub(1) as *mut core::ffi::c_void;
    backtrace::resolve(at, |s| {
        out.push(Frame {
            name: s
                .name()
                .map(|n| format!("{n:#}"))
                .unwrap_or_else(|| format!("{ip:#x}")),
            file: s
                .filename()
                .map(|f| f.display().to_string())
                .unwrap_or_default(),
            line: s.lineno().unwrap_or(0),
        });
    });
    if out.is_empty() {
        out.push(Frame {
            name: format!("{ip:#x}"),
            file: String::new(),
            line: 0,
        });
    }
    out
}

/// Whether a location (its functions, innermost first) is the allocator's own, above the user's
/// call: trimmed from the top of every stack. What counts is the outermost function (the one the
/// others are inlined into): `Box::new` inlined into the user's function is the user's, while the
/// profiler's hook inlined into a `GlobalAlloc` impl (the user's wrapper around `PoolAlloc`, too)
/// is the allocator's.
pub(super) fn is_allocator_location<'a>(names: impl DoubleEndedIterator<Item = &'a str>) -> bool {
    names
        .last()
        .is_some_and(|n| is_allocator(n) || n.contains(" as core::alloc::global::GlobalAlloc>::"))
}

/// Functions of the allocator itself (and of the unwinder).
fn is_allocator(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "poolalloc::profile",
        "poolalloc::global",
        "poolalloc::raw",
        "poolalloc::large",
        "<poolalloc::global",
        "poolalloc_c::",
        "backtrace::",
        "__rust_alloc",
        "__rust_realloc",
        "__rustc::__rust_",
        "__rg_alloc",
        "__rg_realloc",
        "alloc::alloc::",
        "std::alloc::",
        "_Unwind_",
        "malloc",
        "calloc",
        "realloc",
        "posix_memalign",
        "aligned_alloc",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Encodes the snapshot as a (not yet gzipped) profile.proto message.
pub fn encode(snap: &Snapshot, interval: usize) -> Vec<u8> {
    // Per stack entry: [alloc_objects, alloc_space, inuse_objects, inuse_space] (estimates).
    let mut values: HashMap<u32, [f64; 4]> = HashMap::new();
    for (entry, s) in &snap.stacks {
        values.insert(*entry, [s.alloc_objects, s.alloc_bytes, 0.0, 0.0]);
    }
    for r in &snap.records {
        if let Some(v) = values.get_mut(&r.stack) {
            v[2] += r.weight;
            v[3] += r.weight * r.size as f64;
        }
    }
    let mut strings = Strings::new();
    let mut functions: HashMap<(String, String), u64> = HashMap::new();
    let mut function_msgs = Vec::new();
    // Location id per address, and whether it is the allocator's own.
    let mut locations: HashMap<usize, (u64, bool)> = HashMap::new();
    let mut location_msgs = Vec::new();
    let mut samples = Vec::new();
    let stacks: HashMap<u32, &Stack> = snap.stacks.iter().map(|(i, s)| (*i, s)).collect();
    let mut entries: Vec<u32> = values.keys().copied().collect();
    entries.sort_unstable();
    for entry in entries {
        let v = values[&entry];
        let s = stacks[&entry];
        let mut ids = Vec::new();
        for &ip in &s.frames[..s.depth as usize] {
            let (id, own) = *locations.entry(ip).or_insert_with(|| {
                let frames = resolve(ip);
                let own = is_allocator_location(frames.iter().map(|f| f.name.as_str()));
                let id = location_msgs.len() as u64 + 1;
                let mut loc = Msg::default();
                loc.int(1, id);
                loc.int(2, 1);
                loc.int(3, ip as u64);
                for f in frames {
                    let key = (f.name.clone(), f.file.clone());
                    let fid = match functions.get(&key) {
                        Some(&fid) => fid,
                        None => {
                            let fid = function_msgs.len() as u64 + 1;
                            let mut m = Msg::default();
                            m.int(1, fid);
                            m.int(2, strings.id(&f.name));
                            m.int(3, strings.id(&f.name));
                            m.int(4, strings.id(&f.file));
                            function_msgs.push(m);
                            functions.insert(key, fid);
                            fid
                        }
                    };
                    let mut line = Msg::default();
                    line.int(1, fid);
                    line.int(2, f.line as u64);
                    loc.msg(4, line);
                }
                location_msgs.push(loc);
                (id, own)
            });
            // Drop the allocator's frames above the first frame of the caller's.
            if ids.is_empty() && own {
                continue;
            }
            ids.push(id);
        }
        if ids.is_empty() {
            // Every frame was the allocator's: keep the innermost one so the sample has a stack.
            ids.push(locations[&s.frames[0]].0);
        }
        let mut m = Msg::default();
        m.packed(1, ids);
        m.packed(2, v.iter().map(|&x| x.round() as i64 as u64));
        samples.push(m);
    }

    let mut p = Msg::default();
    for (ty, unit) in [
        ("alloc_objects", "count"),
        ("alloc_space", "bytes"),
        ("inuse_objects", "count"),
        ("inuse_space", "bytes"),
    ] {
        let mut vt = Msg::default();
        vt.int(1, strings.id(ty));
        vt.int(2, strings.id(unit));
        p.msg(1, vt);
    }
    for s in samples {
        p.msg(2, s);
    }
    // One mapping spanning the address space, marked symbolized: pprof must not try again.
    let exe = std::env::current_exe()
        .map(|e| e.display().to_string())
        .unwrap_or_default();
    let mut map = Msg::default();
    map.int(1, 1);
    map.int(2, 0);
    map.int(3, u64::MAX);
    map.int(5, strings.id(&exe));
    for field in 7..=10 {
        map.int(field, 1);
    }
    p.msg(3, map);
    for l in location_msgs {
        p.msg(4, l);
    }
    for f in function_msgs {
        p.msg(5, f);
    }
    let period_type = (strings.id("space"), strings.id("bytes"));
    let default_type = strings.id("inuse_space");
    let dropped = strings.id(&format!(
        "poolalloc sampling profiler: mean interval {interval} bytes; {} samples dropped (table full)",
        snap.dropped
    ));
    for s in &strings.list {
        p.bytes(6, s.as_bytes());
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    p.int(9, now);
    let mut pt = Msg::default();
    pt.int(1, period_type.0);
    pt.int(2, period_type.1);
    p.msg(11, pt);
    p.int(12, interval as u64);
    p.packed(13, [dropped]);
    p.int(14, default_type);
    p.0
}
