//! Fragmentation workloads: peak RSS against the peak of live requested bytes, and RSS after free.

use super::{Extra, Params, Rng, block, rss_now};
use std::time::Duration;

/// Measures RSS right after everything was freed and one second later.
pub fn after_free(e: &mut Extra) {
    e.rss_freed = Some(rss_now());
    std::thread::sleep(Duration::from_secs(1));
    e.rss_freed_1s = Some(rss_now());
}

/// (a) fill with small objects, free 90% at random, then allocate objects of a different size.
pub fn frag_fill_free90(p: Params) -> Extra {
    let mut r = Rng::new(3);
    let n = 400_000 * p.scale;
    let mut e = Extra::default();
    let mut v: Vec<Option<Box<[u8]>>> = (0..n).map(|_| Some(block(48, 1))).collect();
    let mut live = n * 48;
    for _ in 0..n * 9 / 10 {
        let i = r.below(n);
        if v[i].take().is_some() {
            live -= 48;
        }
    }
    e.peak_live = n * 48;
    let more: Vec<Box<[u8]>> = (0..n / 2).map(|_| block(200, 2)).collect();
    e.peak_live = e.peak_live.max(live + more.len() * 200);
    drop(more);
    drop(v);
    after_free(&mut e);
    e
}

/// (b) long-lived and short-lived objects interleaved: every 50th object survives, pinning chunks.
pub fn frag_long_short(p: Params) -> Extra {
    let mut e = Extra::default();
    let mut long = Vec::new();
    let mut live = 0;
    for round in 0..20 * p.scale {
        let short: Vec<Box<[u8]>> = (0..50_000)
            .map(|i| {
                let b = block(16 + (i % 7) * 16, round as u8);
                if i % 50 == 0 {
                    long.push(block(16 + (i % 7) * 16, 3));
                    live += 16 + (i % 7) * 16;
                }
                b
            })
            .collect();
        let short_bytes: usize = short.iter().map(|b| b.len()).sum();
        e.peak_live = e.peak_live.max(live + short_bytes);
    }
    drop(long);
    after_free(&mut e);
    e
}

/// (c) request sizes that drift over time: a sliding window of objects whose size grows slowly.
pub fn frag_drift(p: Params) -> Extra {
    let mut e = Extra::default();
    let mut window = std::collections::VecDeque::new();
    let mut live = 0;
    let steps = 600_000 * p.scale;
    for i in 0..steps {
        let size = 16 + (i * 2000 / steps);
        window.push_back(block(size, 5));
        live += size;
        if window.len() > 60_000 {
            live -= window.pop_front().unwrap().len();
        }
        e.peak_live = e.peak_live.max(live);
    }
    drop(window);
    after_free(&mut e);
    e
}

/// (d) allocate a large mixed heap, free everything, measure RSS at once and after 1 s.
pub fn frag_free_all(p: Params) -> Extra {
    let mut e = Extra::default();
    let mut r = Rng::new(11);
    let mut v = Vec::new();
    let mut live = 0;
    for _ in 0..300_000 * p.scale {
        let size = if r.below(100) == 0 {
            r.range(33_000, 200_000)
        } else {
            r.range(8, 2000)
        };
        live += size;
        v.push(block(size, 9));
    }
    e.peak_live = live;
    drop(v);
    after_free(&mut e);
    e
}
