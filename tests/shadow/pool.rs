//! Shadow model of `poolalloc::Pool<T>`: operations decoded from bytes, checked against a HashMap
//! of handle -> value, stale handles included. Shared by the fuzz target `pool` and
//! `tests/pool_shadow.rs`.

use poolalloc::{Handle, Pool};
use std::collections::HashMap;

/// Runs the operations encoded in `data` on a fresh pool (fixed-size when the first byte is odd).
pub fn run(data: &[u8]) {
    let mut it = data.iter().copied();
    let first = it.next().unwrap_or(0);
    let fixed = first % 2 == 1;
    let mut pool: Pool<(u32, Box<u64>)> = if fixed {
        Pool::fixed(usize::from(first) + 1)
    } else {
        Pool::new()
    };
    let mut model: HashMap<Handle<(u32, Box<u64>)>, u32> = HashMap::new();
    let mut stale: Vec<Handle<(u32, Box<u64>)>> = Vec::new();
    let mut next = 0u32;
    while let Some(op) = it.next() {
        let k = usize::from(it.next().unwrap_or(0));
        match op % 8 {
            0..=2 => {
                next += 1;
                match pool.try_insert((next, Box::new(u64::from(next)))) {
                    Ok(h) => assert!(
                        model.insert(h, next).is_none(),
                        "live handle handed out twice"
                    ),
                    Err(v) => {
                        assert!(fixed && model.len() == pool.capacity(), "refused with room");
                        assert_eq!(v.0, next);
                    }
                }
            }
            3..=4 if !model.is_empty() => {
                let h = *model.keys().nth(k % model.len()).unwrap();
                let want = model.remove(&h).unwrap();
                assert_eq!(pool.remove(h).map(|v| v.0), Some(want));
                stale.push(h);
            }
            5 if !stale.is_empty() => {
                let h = stale[k % stale.len()];
                assert!(
                    pool.get(h).is_none() && !pool.contains(h),
                    "stale handle {h:?} found an object"
                );
                assert!(pool.remove(h).is_none());
            }
            6 => {
                if k % 16 == 0 {
                    stale.extend(model.drain().map(|(h, _)| h));
                    pool.clear();
                } else if k % 4 == 0 {
                    pool.shrink_to_fit();
                } else if let Some((&h, &v)) = model.iter().nth(k % model.len().max(1)) {
                    let slot = pool.get_mut(h).unwrap();
                    assert_eq!(slot.0, v);
                    *slot.1 += 1;
                }
            }
            _ => {
                let h = Handle::from_bits(u64::from(op) << 32 | k as u64);
                if let Some(h) = h {
                    assert_eq!(pool.get(h).map(|v| v.0), model.get(&h).copied());
                }
            }
        }
        assert_eq!(pool.len(), model.len());
    }
    let mut seen: Vec<u32> = pool
        .iter()
        .map(|(h, v)| {
            assert_eq!(model.get(&h), Some(&v.0));
            v.0
        })
        .collect();
    seen.sort_unstable();
    let mut want: Vec<u32> = model.values().copied().collect();
    want.sort_unstable();
    assert_eq!(seen, want, "iteration disagrees with the model");
}
