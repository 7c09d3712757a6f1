//! Shadow model of `poolalloc::Pool<T>`: operations decoded from bytes, checked against a HashMap
//! of handle -> value, stale handles included. Shared by the fuzz target `pool` and
//! `tests/pool_shadow.rs`.
//!
//! The model drives the pool through [`SlotPool`] (this crate does not link poolalloc); a test or
//! fuzz target gets the implementation for `poolalloc::Pool` with
//! [`pool_under_test!`](crate::pool_under_test):
//!
//! ```ignore
//! poolalloc_test_support::pool_under_test!(PoolUnderTest);
//! poolalloc_test_support::pool::run::<PoolUnderTest>(data);
//! ```

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;

/// What the pool holds: a value to compare with the model's, and a box, so a lost or doubly
/// dropped element shows.
pub type Item = (u32, Box<u64>);

/// The operations of `poolalloc::Pool<Item>` the model runs, under the same names.
#[allow(clippy::len_without_is_empty)] // Pool has is_empty; the model asks for the length only
pub trait SlotPool {
    /// The pool's handle.
    type Handle: Copy + Eq + Hash + Debug;
    /// A pool of `capacity` elements at most (`Pool::fixed`), or a growing one (`Pool::new`).
    fn with_capacity(capacity: Option<usize>) -> Self;
    /// The handle of these bits (`Handle::from_bits`), if they make one.
    fn handle_from_bits(bits: u64) -> Option<Self::Handle>;
    fn try_insert(&mut self, value: Item) -> Result<Self::Handle, Item>;
    fn remove(&mut self, h: Self::Handle) -> Option<Item>;
    fn get(&self, h: Self::Handle) -> Option<&Item>;
    fn get_mut(&mut self, h: Self::Handle) -> Option<&mut Item>;
    fn contains(&self, h: Self::Handle) -> bool;
    fn clear(&mut self);
    fn shrink_to_fit(&mut self);
    fn len(&self) -> usize;
    fn capacity(&self) -> usize;
    /// Every (handle, element), in the pool's order of iteration.
    fn elements(&self) -> Vec<(Self::Handle, &Item)>;
}

/// `$name`: `poolalloc::Pool<Item>` as a [`SlotPool`], for the test or fuzz target that expands
/// it (where `poolalloc` is linked).
#[macro_export]
macro_rules! pool_under_test {
    ($name:ident) => {
        /// `poolalloc::Pool` under the shadow model (`poolalloc_test_support::pool`).
        struct $name(::poolalloc::Pool<$crate::pool::Item>);

        impl $crate::pool::SlotPool for $name {
            type Handle = ::poolalloc::Handle<$crate::pool::Item>;
            fn with_capacity(capacity: Option<usize>) -> Self {
                $name(match capacity {
                    Some(n) => ::poolalloc::Pool::fixed(n),
                    None => ::poolalloc::Pool::new(),
                })
            }
            fn handle_from_bits(bits: u64) -> Option<Self::Handle> {
                ::poolalloc::Handle::from_bits(bits)
            }
            fn try_insert(
                &mut self,
                value: $crate::pool::Item,
            ) -> Result<Self::Handle, $crate::pool::Item> {
                self.0.try_insert(value)
            }
            fn remove(&mut self, h: Self::Handle) -> Option<$crate::pool::Item> {
                self.0.remove(h)
            }
            fn get(&self, h: Self::Handle) -> Option<&$crate::pool::Item> {
                self.0.get(h)
            }
            fn get_mut(&mut self, h: Self::Handle) -> Option<&mut $crate::pool::Item> {
                self.0.get_mut(h)
            }
            fn contains(&self, h: Self::Handle) -> bool {
                self.0.contains(h)
            }
            fn clear(&mut self) {
                self.0.clear()
            }
            fn shrink_to_fit(&mut self) {
                self.0.shrink_to_fit()
            }
            fn len(&self) -> usize {
                self.0.len()
            }
            fn capacity(&self) -> usize {
                self.0.capacity()
            }
            fn elements(&self) -> Vec<(Self::Handle, &$crate::pool::Item)> {
                self.0.iter().collect()
            }
        }
    };
}

/// Runs the operations encoded in `data` on a fresh pool (fixed-size when the first byte is odd).
pub fn run<P: SlotPool>(data: &[u8]) {
    let mut it = data.iter().copied();
    let first = it.next().unwrap_or(0);
    let fixed = first % 2 == 1;
    let mut pool = P::with_capacity(fixed.then(|| usize::from(first) + 1));
    let mut model: HashMap<P::Handle, u32> = HashMap::new();
    let mut stale: Vec<P::Handle> = Vec::new();
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
                let h = P::handle_from_bits(u64::from(op) << 32 | k as u64);
                if let Some(h) = h {
                    assert_eq!(pool.get(h).map(|v| v.0), model.get(&h).copied());
                }
            }
        }
        assert_eq!(pool.len(), model.len());
    }
    let mut seen: Vec<u32> = pool
        .elements()
        .into_iter()
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
