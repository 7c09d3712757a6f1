//! groupby: a data-processing job of the kind users of polars or databend time, written the way a
//! plain Rust program does it. A table of rows (a string key, an integer value), ~200k distinct keys
//! of varied length among 2M rows at full scale, is grouped by key into `HashMap<String, Agg>`:
//! count, sum, min, max and the list of the group's values (a growing buffer per group). Each of
//! `p.threads` workers groups a partition of the rows into a map of its own; the main thread then
//! merges the partial maps into the largest one (dropping the absorbed keys and lists, which other
//! threads allocated), sorts the groups by key and drops everything; twice. The heap is
//! a key `String` per group and partition, the maps' tables, and per group a `Vec` grown by
//! doubling, then extended again by the merge.

use super::{Extra, Params, Rng};
use std::collections::HashMap;
use std::time::Instant;

/// One group's aggregates.
struct Agg {
    count: u64,
    sum: i64,
    min: i64,
    max: i64,
    /// Every value of the group, in row order (a `list` aggregation).
    values: Vec<i64>,
}

impl Agg {
    fn new(v: i64) -> Agg {
        Agg {
            count: 1,
            sum: v,
            min: v,
            max: v,
            values: vec![v],
        }
    }

    fn add(&mut self, v: i64) {
        self.count += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.values.push(v);
    }

    fn merge(&mut self, other: Agg) {
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.values.extend_from_slice(&other.values);
    }
}

/// The input table: a string column stored as a dictionary of distinct keys (as Arrow's
/// dictionary arrays and polars' categoricals store one) plus per row a key index and a value.
struct Table {
    keys: Vec<String>,
    rows: Vec<(u32, i64)>,
    /// What a correct grouping must find: the number of distinct keys that occur, and the sum of
    /// all values.
    groups: usize,
    total: i64,
}

/// A deterministic table: `distinct` keys of 6 to ~70 bytes (a prefix, the key's number, a random
/// tail), and `rows` rows whose keys are a quarter drawn from the first 1% of the keys (hot keys,
/// long lists) and the rest uniformly.
fn table(distinct: usize, rows: usize) -> Table {
    const PREFIXES: [&str; 6] = ["c", "sku", "user", "eu-west/shop", "order-line", "session"];
    let mut r = Rng::new(24);
    let keys: Vec<String> = (0..distinct)
        .map(|i| {
            let mut k = format!("{}-{i:x}-", PREFIXES[r.below(PREFIXES.len())]);
            for _ in 0..r.below(48) {
                k.push((b'a' + r.below(26) as u8) as char);
            }
            k
        })
        .collect();
    let hot = distinct / 100 + 1;
    let mut seen = vec![false; distinct];
    let mut total = 0;
    let rows: Vec<(u32, i64)> = (0..rows)
        .map(|_| {
            let k = if r.below(4) == 0 {
                r.below(hot)
            } else {
                r.below(distinct)
            };
            seen[k] = true;
            let v = r.below(1_000_000) as i64 - 500_000;
            total += v;
            (k as u32, v)
        })
        .collect();
    Table {
        keys,
        rows,
        groups: seen.iter().filter(|&&s| s).count(),
        total,
    }
}

/// One worker's grouping of its partition. A key is copied into the map only when its group is
/// new, as a careful program does (`entry(key.to_owned())` would allocate on every row).
fn group(keys: &[String], rows: &[(u32, i64)]) -> HashMap<String, Agg> {
    let mut m: HashMap<String, Agg> = HashMap::new();
    for &(k, v) in rows {
        let key = keys[k as usize].as_str();
        match m.get_mut(key) {
            Some(a) => a.add(v),
            None => {
                m.insert(key.to_owned(), Agg::new(v));
            }
        }
    }
    m
}

pub(super) fn groupby(p: Params) -> Extra {
    let t = Instant::now();
    let table = table(50_000 * p.scale, 500_000 * p.scale);
    let setup = t.elapsed();
    let threads = p.threads.max(1);
    let part = table.rows.len().div_ceil(threads);
    for _ in 0..2 {
        let mut partials: Vec<HashMap<String, Agg>> = std::thread::scope(|s| {
            let workers: Vec<_> = table
                .rows
                .chunks(part)
                .map(|rows| s.spawn(|| group(&table.keys, rows)))
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        // Into the largest map, as a careful program merges; the others are dropped here.
        partials.sort_unstable_by_key(|m| std::cmp::Reverse(m.len()));
        let mut rest = partials.split_off(1);
        let mut merged = partials.pop().unwrap();
        for m in rest.drain(..) {
            for (k, a) in m {
                match merged.get_mut(&k) {
                    Some(b) => b.merge(a),
                    None => {
                        merged.insert(k, a);
                    }
                }
            }
        }
        let mut groups: Vec<(String, Agg)> = merged.into_iter().collect();
        groups.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        // A grouping that lost, duplicated or mixed up rows fails one of these.
        assert_eq!(groups.len(), table.groups, "groups");
        let count: u64 = groups.iter().map(|g| g.1.count).sum();
        let sum: i64 = groups.iter().map(|g| g.1.sum).sum();
        assert_eq!(count as usize, table.rows.len(), "rows counted");
        assert_eq!(sum, table.total, "sum of the values");
        assert!(
            groups.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted, distinct"
        );
        assert!(groups.iter().all(|(_, a)| {
            a.values.len() as u64 == a.count
                && a.min <= a.max
                && a.values.iter().sum::<i64>() == a.sum
        }));
        std::hint::black_box(groups);
    }
    Extra {
        setup,
        ..Extra::default()
    }
}
