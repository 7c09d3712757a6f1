//! A minimal reader of pprof's profile.proto, for the tests of the profiler (`tests/profile.rs`,
//! `tests/profile_on_demand.rs`, `capi/tests/profile.rs`) and `examples/profile_markdown.rs`: the
//! strings, functions, locations, samples and sample types, enough to total a sample type over the
//! stacks that pass through a function.

use std::collections::HashMap;

/// Reads a gzipped profile file (through `gzip -dc`, so the tests need no gzip crate).
pub fn read(path: &std::path::Path) -> Profile {
    let out = std::process::Command::new("gzip")
        .arg("-dc")
        .arg(path)
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap_or_else(|e| panic!("gzip -dc {}: {e}", path.display()));
    assert!(
        out.status.success(),
        "gzip -dc {}: {:?}",
        path.display(),
        out.status
    );
    parse(&out.stdout)
}

/// A minimal reader of profile.proto: what the test needs (strings, functions, locations,
/// samples, sample types).
#[derive(Default)]
pub struct Profile {
    strings: Vec<String>,
    sample_types: Vec<u64>,
    samples: Vec<(Vec<u64>, Vec<i64>)>,
    /// location id -> function ids
    locations: HashMap<u64, Vec<u64>>,
    /// function id -> name (string index)
    functions: HashMap<u64, u64>,
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> u64 {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.0[0];
            self.0 = &self.0[1..];
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return v;
            }
            shift += 7;
        }
    }
    /// The next field: (number, varint value or 0, bytes or empty).
    fn field(&mut self) -> Option<(u64, u64, &'a [u8])> {
        if self.0.is_empty() {
            return None;
        }
        let key = self.varint();
        match key & 7 {
            0 => Some((key >> 3, self.varint(), &[])),
            2 => {
                let n = self.varint() as usize;
                let (b, rest) = self.0.split_at(n);
                self.0 = rest;
                Some((key >> 3, 0, b))
            }
            w => panic!("wire type {w} not expected in a profile"),
        }
    }
    fn packed(b: &[u8]) -> Vec<u64> {
        let mut r = Reader(b);
        let mut v = Vec::new();
        while !r.0.is_empty() {
            v.push(r.varint());
        }
        v
    }
}

/// Reads an uncompressed profile.
pub fn parse(bytes: &[u8]) -> Profile {
    let mut p = Profile::default();
    let mut r = Reader(bytes);
    while let Some((f, _, b)) = r.field() {
        match f {
            1 => {
                let mut m = Reader(b);
                while let Some((f, v, _)) = m.field() {
                    if f == 1 {
                        p.sample_types.push(v);
                    }
                }
            }
            2 => {
                let (mut locs, mut vals) = (Vec::new(), Vec::new());
                let mut m = Reader(b);
                while let Some((f, _, b)) = m.field() {
                    match f {
                        1 => locs = Reader::packed(b),
                        2 => vals = Reader::packed(b).into_iter().map(|v| v as i64).collect(),
                        _ => {}
                    }
                }
                p.samples.push((locs, vals));
            }
            4 => {
                let (mut id, mut fns) = (0, Vec::new());
                let mut m = Reader(b);
                while let Some((f, v, b)) = m.field() {
                    match f {
                        1 => id = v,
                        4 => {
                            let mut l = Reader(b);
                            while let Some((f, v, _)) = l.field() {
                                if f == 1 {
                                    fns.push(v);
                                }
                            }
                        }
                        _ => {}
                    }
                }
                p.locations.insert(id, fns);
            }
            5 => {
                let (mut id, mut name) = (0, 0);
                let mut m = Reader(b);
                while let Some((f, v, _)) = m.field() {
                    match f {
                        1 => id = v,
                        2 => name = v,
                        _ => {}
                    }
                }
                p.functions.insert(id, name);
            }
            6 => p.strings.push(String::from_utf8(b.to_vec()).unwrap()),
            _ => {}
        }
    }
    p
}

impl Profile {
    pub fn index_of(&self, ty: &str) -> usize {
        self.sample_types
            .iter()
            .position(|&s| self.strings[s as usize] == ty)
            .unwrap_or_else(|| panic!("no sample type {ty}"))
    }
    /// The sum of sample type `ty` over the samples whose stack names a function containing `f`.
    pub fn total(&self, f: &str, ty: &str) -> f64 {
        let i = self.index_of(ty);
        self.samples
            .iter()
            .filter(|(locs, _)| {
                locs.iter().any(|l| {
                    self.locations[l]
                        .iter()
                        .any(|fid| self.strings[self.functions[fid] as usize].contains(f))
                })
            })
            .map(|(_, v)| v[i] as f64)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn int(field: u64, v: u64, out: &mut Vec<u8>) {
        varint(field << 3, out);
        varint(v, out);
    }
    fn bytes(field: u64, b: &[u8], out: &mut Vec<u8>) {
        varint(field << 3 | 2, out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }
    fn message(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut m = Vec::new();
        f(&mut m);
        m
    }

    /// A profile with one sample type and two stacks: the total follows the function names.
    #[test]
    fn totals_a_sample_type_over_the_stacks_through_a_function() {
        let mut p = Vec::new();
        bytes(1, &message(|m| int(1, 1, m)), &mut p); // sample type "alloc_space"
        for (loc, value) in [(1u64, 10u64), (2, 300)] {
            let sample = message(|m| {
                bytes(1, &message(|l| varint(loc, l)), m);
                bytes(2, &message(|v| varint(value, v)), m);
            });
            bytes(2, &sample, &mut p);
        }
        for (id, function) in [(1u64, 1u64), (2, 2)] {
            // A location with one line in `function`; the function named by string `function + 1`.
            let line = message(|l| int(1, function, l));
            let location = message(|m| {
                int(1, id, m);
                bytes(4, &line, m);
            });
            let named = message(|m| {
                int(1, function, m);
                int(2, function + 1, m);
            });
            bytes(4, &location, &mut p);
            bytes(5, &named, &mut p);
        }
        for s in ["", "alloc_space", "site_a", "site_b"] {
            bytes(6, s.as_bytes(), &mut p);
        }
        let profile = parse(&p);
        assert_eq!(profile.index_of("alloc_space"), 0);
        assert_eq!(profile.total("site_a", "alloc_space"), 10.0);
        assert_eq!(profile.total("site_b", "alloc_space"), 300.0);
        assert_eq!(profile.total("site_", "alloc_space"), 310.0);
    }
}
