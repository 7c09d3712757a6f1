//! Collections on a `FailingAlloc`, driven by bytes and checked against a model after every
//! operation: a `hashbrown::HashMap<u16, Vec<u8>>` whose values are themselves vectors on the same
//! allocator, and an `allocator_api2::vec::Vec<u32>`. The first bytes of the input are the
//! failure schedule (`fail_pattern`), the rest are operations. Shared by the cargo-fuzz target
//! `collections` and by `tests/testing_real_crates.rs` (seeded inputs and saved regressions).
//!
//! Checked, the way a crate author relies on these crates' fallible APIs:
//! - a `try_reserve*` that returns `Err` was refused by the allocator (a failure was scheduled and
//!   the error names an allocation, not a capacity overflow), and left the container exactly as
//!   it was: same length, contents and capacity;
//! - a `try_reserve*` that returns `Ok` gives the promised capacity, and the insertions it made
//!   room for do not allocate (`push_within_capacity`, `extend_from_slice`, `insert`);
//! - contents always equal the model's;
//! - run inside `poolalloc::testing::count`: once the containers are dropped, no block is left
//!   (`live_blocks == 0`), whatever the schedule refused on the way.
//!
//! The model reaches `FailingAlloc<PoolAlloc>` and `count` through [`Scheduled`] (this crate does
//! not link poolalloc); the test or fuzz target that runs it implements it with
//! [`failing_pool_alloc!`](crate::failing_pool_alloc) (it needs poolalloc's `testing` feature):
//!
//! ```ignore
//! poolalloc_test_support::failing_pool_alloc!(FailingPoolAlloc);
//! poolalloc_test_support::collections::run::<FailingPoolAlloc>(data);
//! ```

use allocator_api2::alloc::Allocator;
use allocator_api2::collections::TryReserveErrorKind;
use allocator_api2::vec::Vec as AVec;
use hashbrown::{DefaultHashBuilder, HashMap};
use std::collections::BTreeMap;

/// The longest failure schedule an input gives, in bytes (8 allocations per byte).
const MAX_PATTERN: usize = 32;

/// What `poolalloc::testing::count` counted, the figures the model checks.
#[derive(Clone, Copy, Debug)]
pub struct Counts {
    pub allocations: usize,
    pub reallocations: usize,
    pub frees: usize,
    pub live_blocks: usize,
}

/// The allocator under the collections (`poolalloc::testing::FailingAlloc` over a `PoolAlloc`)
/// and the count around them (`poolalloc::testing::count`).
pub trait Scheduled: Sized {
    /// The allocator the collections are built on.
    type Alloc: Allocator;
    /// A fresh allocator that refuses the allocations `pattern` schedules (`fail_pattern`).
    fn with_schedule(pattern: &[u8]) -> Self;
    fn allocator(&self) -> &Self::Alloc;
    /// The allocations asked of it, refused ones included.
    fn allocations(&self) -> usize;
    /// The allocations it refused.
    fn failures(&self) -> usize;
    /// `f` run under `count`.
    fn count(f: impl FnOnce()) -> Counts;
}

/// `$name`: `poolalloc::testing::FailingAlloc<poolalloc::PoolAlloc>` as a [`Scheduled`], for the
/// test or fuzz target that expands it (where `poolalloc` is linked with the `testing` feature).
#[macro_export]
macro_rules! failing_pool_alloc {
    ($name:ident) => {
        /// `FailingAlloc<PoolAlloc>` under the collections model
        /// (`poolalloc_test_support::collections`).
        struct $name(::poolalloc::testing::FailingAlloc<::poolalloc::PoolAlloc>);

        impl $crate::collections::Scheduled for $name {
            type Alloc = ::poolalloc::testing::FailingAlloc<::poolalloc::PoolAlloc>;
            fn with_schedule(pattern: &[u8]) -> Self {
                $name(
                    ::poolalloc::testing::FailingAlloc::new(::poolalloc::PoolAlloc::new())
                        .fail_pattern(pattern),
                )
            }
            fn allocator(&self) -> &Self::Alloc {
                &self.0
            }
            fn allocations(&self) -> usize {
                self.0.allocations()
            }
            fn failures(&self) -> usize {
                self.0.failures()
            }
            fn count(f: impl FnOnce()) -> $crate::collections::Counts {
                let ((), c) = ::poolalloc::testing::count(f);
                $crate::collections::Counts {
                    allocations: c.allocations,
                    reallocations: c.reallocations,
                    frees: c.frees,
                    live_blocks: c.live_blocks,
                }
            }
        }
    };
}

type Value<'a, S> = AVec<u8, &'a <S as Scheduled>::Alloc>;
type Map<'a, S> = HashMap<u16, Value<'a, S>, DefaultHashBuilder, &'a <S as Scheduled>::Alloc>;

/// Runs the input: byte 0 gives the schedule's length (modulo 33), the schedule follows, then the
/// operations. Panics on the first disagreement with the model or on a leak.
pub fn run<S: Scheduled>(data: &[u8]) {
    let (len, rest) = data.split_first().map_or((0, data), |(&b, r)| (b, r));
    let len = (usize::from(len) % (MAX_PATTERN + 1)).min(rest.len());
    let (pattern, ops) = rest.split_at(len);
    let fa = S::with_schedule(pattern);
    let counts = S::count(|| Session::new(&fa).run(ops));
    assert_eq!(
        counts.live_blocks, 0,
        "blocks left after the containers were dropped (schedule {pattern:?}): {counts:?}"
    );
    // Everything was allocated and freed inside the count, so the two counts meet; and every
    // allocation or grow the schedule let through reached PoolAlloc, where the count saw it (the
    // rest of its figures are the model's own blocks).
    assert_eq!(counts.allocations, counts.frees, "{counts:?}");
    let passed = fa.allocations() - fa.failures();
    assert!(
        counts.allocations + counts.reallocations >= passed,
        "count saw fewer allocations than FailingAlloc passed on ({passed}): {counts:?}"
    );
}

/// Reads the operations; `None` once the input is used up.
struct Ops<'a>(&'a [u8]);

impl Ops<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    /// A count of elements: mostly small, sometimes enough to take the block past a chunk's size
    /// classes (a large block).
    fn amount(&mut self) -> Option<usize> {
        let b = self.byte()?;
        Some(match b {
            0..=223 => usize::from(b % 64),
            _ => usize::from(self.byte()?) * 64 + usize::from(b),
        })
    }
}

/// Runs `f` and asserts it asked `fa` for nothing.
fn no_allocation<S: Scheduled, R>(fa: &S, what: &str, f: impl FnOnce() -> R) -> R {
    let before = fa.allocations();
    let r = f();
    assert_eq!(fa.allocations(), before, "{what} allocated");
    r
}

struct Session<'a, S: Scheduled> {
    fa: &'a S,
    vec: AVec<u32, &'a S::Alloc>,
    vec_model: Vec<u32>,
    map: Map<'a, S>,
    map_model: BTreeMap<u16, Vec<u8>>,
    next: u32,
}

impl<'a, S: Scheduled> Session<'a, S> {
    fn new(fa: &'a S) -> Self {
        Session {
            fa,
            vec: AVec::new_in(fa.allocator()),
            vec_model: Vec::new(),
            map: HashMap::with_hasher_in(DefaultHashBuilder::default(), fa.allocator()),
            map_model: BTreeMap::new(),
            next: 0,
        }
    }

    fn run(mut self, ops: &[u8]) {
        let mut ops = Ops(ops);
        while let Some(op) = ops.byte() {
            if self.step(op, &mut ops).is_none() {
                break;
            }
            self.check();
        }
        self.check();
    }

    /// Fresh element values, so a lost or duplicated element shows.
    fn fresh(&mut self) -> u32 {
        self.next = self.next.wrapping_add(0x9e37_79b9);
        self.next
    }

    fn step(&mut self, op: u8, ops: &mut Ops) -> Option<()> {
        match op % 16 {
            0 | 1 => {
                let n = ops.amount()?;
                let exact = op % 16 == 1;
                let cap = self.vec.capacity();
                let failures = self.fa.failures();
                let r = if exact {
                    self.vec.try_reserve_exact(n)
                } else {
                    self.vec.try_reserve(n)
                };
                let refused = self.fa.failures() > failures;
                match r {
                    Ok(()) => {
                        assert!(!refused, "Vec::try_reserve returned Ok after a refusal");
                        assert!(self.vec.capacity() >= self.vec.len() + n);
                    }
                    Err(e) => {
                        assert!(refused, "Vec::try_reserve failed with no refusal: {e}");
                        assert!(
                            matches!(e.kind(), TryReserveErrorKind::AllocError { .. }),
                            "{e}"
                        );
                        assert_eq!(
                            self.vec.capacity(),
                            cap,
                            "failed try_reserve changed capacity"
                        );
                    }
                }
            }
            2 => {
                let x = self.fresh();
                let full = self.vec.len() == self.vec.capacity();
                let r = no_allocation(self.fa, "push_within_capacity", || {
                    self.vec.push_within_capacity(x)
                });
                assert_eq!(r.is_err(), full);
                if r.is_ok() {
                    self.vec_model.push(x);
                }
            }
            3 => {
                let n = ops.amount()?;
                let items: Vec<u32> = (0..n).map(|_| self.fresh()).collect();
                if self.vec.try_reserve(n).is_ok() {
                    no_allocation(self.fa, "extend_from_slice after try_reserve", || {
                        self.vec.extend_from_slice(&items)
                    });
                    self.vec_model.extend_from_slice(&items);
                }
            }
            4 => {
                let at = usize::from(ops.byte()?);
                if self.vec.try_reserve(1).is_ok() {
                    let at = at % (self.vec.len() + 1);
                    let x = self.fresh();
                    no_allocation(self.fa, "insert after try_reserve(1)", || {
                        self.vec.insert(at, x)
                    });
                    self.vec_model.insert(at, x);
                }
            }
            5 => {
                let at = usize::from(ops.byte()?);
                if !self.vec.is_empty() {
                    let at = at % self.vec.len();
                    assert_eq!(self.vec.remove(at), self.vec_model.remove(at));
                }
            }
            6 => {
                let n = ops.amount()?;
                self.vec.truncate(n);
                self.vec_model.truncate(n);
            }
            7 => {
                // Shrinking hands memory back; the schedule refuses allocations only.
                let n = ops.amount()?;
                let cap = self.vec.capacity();
                self.vec.shrink_to(n);
                let expect = if cap > n { n.max(self.vec.len()) } else { cap };
                assert_eq!(self.vec.capacity(), expect, "shrink_to({n}) from {cap}");
            }
            8 | 9 => {
                let n = ops.amount()?;
                let cap = self.map.capacity();
                let failures = self.fa.failures();
                let r = self.map.try_reserve(n);
                let refused = self.fa.failures() > failures;
                match r {
                    Ok(()) => {
                        assert!(!refused, "HashMap::try_reserve returned Ok after a refusal");
                        assert!(self.map.capacity() >= self.map.len() + n);
                    }
                    Err(e) => {
                        assert!(
                            refused,
                            "HashMap::try_reserve failed with no refusal: {e:?}"
                        );
                        assert!(
                            matches!(e, hashbrown::TryReserveError::AllocError { .. }),
                            "{e:?}"
                        );
                        assert_eq!(
                            self.map.capacity(),
                            cap,
                            "failed try_reserve changed capacity"
                        );
                    }
                }
            }
            10 | 11 => {
                // Insert or replace: the value is built first (it may be refused), then the map
                // makes room for it (it may be refused), then the insertion cannot allocate.
                let key = u16::from(ops.byte()?) % 64 * 4;
                let n = ops.amount()?;
                let mut value: Value<'a, S> = AVec::new_in(self.fa.allocator());
                if value.try_reserve_exact(n).is_err() {
                    assert_eq!(value.capacity(), 0);
                    return Some(());
                }
                let bytes: Vec<u8> = (0..n).map(|i| (i as u8) ^ (key as u8)).collect();
                value.extend_from_slice(&bytes);
                if self.map.try_reserve(1).is_ok() {
                    let old =
                        no_allocation(self.fa, "HashMap::insert after try_reserve(1)", || {
                            self.map.insert(key, value)
                        });
                    let old_model = self.map_model.insert(key, bytes);
                    assert_eq!(old.as_deref(), old_model.as_deref());
                }
            }
            12 => {
                let key = u16::from(ops.byte()?) % 64 * 4;
                let r = self.map.remove(&key);
                assert_eq!(r.as_deref(), self.map_model.remove(&key).as_deref());
            }
            13 => {
                // Append to a value in place.
                let key = u16::from(ops.byte()?) % 64 * 4;
                let n = ops.amount()?;
                if let Some(v) = self.map.get_mut(&key) {
                    let (len, cap) = (v.len(), v.capacity());
                    if v.try_reserve(n).is_ok() {
                        v.extend((0..n).map(|i| i as u8));
                        let m = self.map_model.get_mut(&key).unwrap();
                        m.extend((0..n).map(|i| i as u8));
                    } else {
                        assert_eq!((v.len(), v.capacity()), (len, cap));
                    }
                }
            }
            14 => {
                let keep = ops.byte()?;
                let pred = |k: &u16| (k / 4 + u16::from(keep)) % 3 != 0;
                self.map.retain(|k, _| pred(k));
                self.map_model.retain(|k, _| pred(k));
            }
            _ => match ops.byte()? % 4 {
                0 => {
                    self.vec.clear();
                    self.vec_model.clear();
                }
                1 => {
                    self.map.clear();
                    self.map_model.clear();
                }
                2 => {
                    // Drop a container whole and start over.
                    self.vec = AVec::new_in(self.fa.allocator());
                    self.vec_model.clear();
                }
                _ => {
                    self.map =
                        HashMap::with_hasher_in(DefaultHashBuilder::default(), self.fa.allocator());
                    self.map_model.clear();
                }
            },
        }
        Some(())
    }

    fn check(&self) {
        assert_eq!(self.vec.as_slice(), self.vec_model.as_slice());
        assert_eq!(self.map.len(), self.map_model.len());
        assert_eq!(self.map.iter().count(), self.map_model.len());
        for (k, v) in &self.map_model {
            let got = self.map.get(k).unwrap_or_else(|| panic!("key {k} missing"));
            assert_eq!(got.as_slice(), v.as_slice(), "value of key {k}");
        }
    }
}
