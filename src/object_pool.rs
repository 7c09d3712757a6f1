//! Typed object pools with generational handles: the Om engine's `object_pool<T>` (chunks that never
//! move, free slots daisy-chained when a chunk is added) with GTA's slot seeds (a handle carries the
//! slot's generation, so a handle to a removed object never finds a later one).
//!
//! A pool is a list of chunks of [`CHUNK_SLOTS`] slots. Each chunk is one allocation through the
//! global allocator (in a program that installs [`PoolAlloc`](crate::PoolAlloc), one of its pools)
//! and never moves, so objects never move once inserted. Each chunk keeps a 64-bit occupancy word:
//! iteration visits occupied slots only, by counting trailing zeros, so a sparse pool iterates fast.

use core::fmt;
use core::hash::{Hash, Hasher};
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::num::NonZeroU32;

/// Slots per chunk: one occupancy word's worth.
pub const CHUNK_SLOTS: usize = 64;

/// End of the free list.
const NONE: u32 = u32::MAX;

/// A handle to an object in a [`Pool`]: the slot index and the slot's generation when the object
/// was inserted. 8 bytes, and `Option<Handle<T>>` is 8 bytes too.
pub struct Handle<T> {
    index: u32,
    generation: NonZeroU32,
    _type: PhantomData<fn() -> T>,
}

impl<T> Handle<T> {
    /// The slot index.
    pub fn index(self) -> u32 {
        self.index
    }

    /// The generation the slot had when the object was inserted.
    pub fn generation(self) -> NonZeroU32 {
        self.generation
    }

    /// The handle as 64 bits (generation in the high half), for FFI or storage.
    pub fn to_bits(self) -> u64 {
        (u64::from(self.generation.get()) << 32) | u64::from(self.index)
    }

    /// A handle from [`to_bits`](Handle::to_bits); `None` if the generation half is zero.
    pub fn from_bits(bits: u64) -> Option<Handle<T>> {
        Some(Handle {
            index: bits as u32,
            generation: NonZeroU32::new((bits >> 32) as u32)?,
            _type: PhantomData,
        })
    }
}

impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Handle<T> {}
impl<T> PartialEq for Handle<T> {
    fn eq(&self, o: &Self) -> bool {
        self.to_bits() == o.to_bits()
    }
}
impl<T> Eq for Handle<T> {}
impl<T> PartialOrd for Handle<T> {
    fn partial_cmp(&self, o: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Handle<T> {
    /// By index, then generation.
    fn cmp(&self, o: &Self) -> core::cmp::Ordering {
        (self.index, self.generation).cmp(&(o.index, o.generation))
    }
}
impl<T> Hash for Handle<T> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.to_bits().hash(h)
    }
}
impl<T> fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Handle({}v{})", self.index, self.generation)
    }
}

struct Slot<T> {
    value: MaybeUninit<T>,
    /// The slot's current generation. A handle matches iff the slot is occupied and its generation
    /// equals this. `RETIRED` once the generation would wrap: the slot is never used again.
    generation: u32,
    /// Next free slot (valid while the slot is free and on the free list).
    next_free: u32,
}

/// The generation of a slot that may not be reused.
const RETIRED: u32 = 0;

struct Chunk<T> {
    slots: [Slot<T>; CHUNK_SLOTS],
    /// Bit i set iff slot i holds a value.
    occupied: u64,
}

/// A typed pool of `T` (see the module docs).
///
/// ```
/// let mut pool = poolalloc::Pool::new();
/// let a = pool.insert("first");
/// let b = pool.insert("second");
/// assert_eq!(pool.get(a), Some(&"first"));
/// assert_eq!(pool.remove(a), Some("first"));
/// assert_eq!(pool.get(a), None); // stale: the slot's generation moved on
/// assert_eq!(pool.len(), 1);
/// # let _ = b;
/// ```
pub struct Pool<T> {
    chunks: Vec<Box<Chunk<T>>>,
    /// Head of the free list of slot indices (`NONE` when empty).
    free: u32,
    len: usize,
    /// Slots that may ever exist; `usize::MAX` for a growable pool.
    limit: usize,
    /// Generation given to the slots of a new chunk: above every generation a dropped chunk had, so
    /// handles into chunks freed by `shrink_to_fit` stay stale when the index range is grown again.
    fresh_generation: u32,
}

// SAFETY: a Pool owns its values like a Vec<T>; moving it moves them.
unsafe impl<T: Send> Send for Pool<T> {}
// SAFETY: shared access only hands out &T.
unsafe impl<T: Sync> Sync for Pool<T> {}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Pool<T> {
    /// An empty pool that grows a chunk at a time.
    pub fn new() -> Self {
        Pool {
            chunks: Vec::new(),
            free: NONE,
            len: 0,
            limit: usize::MAX,
            fresh_generation: 1,
        }
    }

    /// A growable pool with room for `n` objects before it grows.
    pub fn with_capacity(n: usize) -> Self {
        let mut p = Self::new();
        while p.capacity() < n {
            p.enlarge();
        }
        p
    }

    /// A pool of exactly `n` slots that never grows: [`insert`](Pool::insert) panics and
    /// [`try_insert`](Pool::try_insert) gives the value back when it is full.
    pub fn fixed(n: usize) -> Self {
        let mut p = Self::new();
        p.limit = n;
        while p.capacity() < n {
            p.enlarge();
        }
        p
    }

    #[doc(hidden)]
    /// Testing hook: slots of chunks added from now on start at generation `g` (to reach generation
    /// exhaustion without 2^32 reuses).
    pub fn start_generations_at(&mut self, g: NonZeroU32) {
        self.fresh_generation = g.get();
    }

    /// Number of objects in the pool.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the pool holds no object.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots the pool has now (occupied, free and retired).
    pub fn capacity(&self) -> usize {
        (self.chunks.len() * CHUNK_SLOTS).min(self.limit)
    }

    /// Adds a chunk and daisy-chains its free slots onto the free list (the Om `enlarge()`).
    fn enlarge(&mut self) -> bool {
        let base = self.chunks.len() * CHUNK_SLOTS;
        if base >= self.limit || base + CHUNK_SLOTS > NONE as usize {
            return false;
        }
        let usable = CHUNK_SLOTS.min(self.limit - base);
        let g = self.fresh_generation;
        // Built in place: a chunk is a few KiB, too big to assemble on the stack and copy.
        let mut chunk = Box::<Chunk<T>>::new_uninit();
        let c = chunk.as_mut_ptr();
        // SAFETY: c points to uninitialised memory for one Chunk<T>; every field except the values
        // (MaybeUninit, valid uninitialised) is written before assume_init.
        let chunk = unsafe {
            let slots = core::ptr::addr_of_mut!((*c).slots).cast::<Slot<T>>();
            for i in 0..CHUNK_SLOTS {
                let s = slots.add(i);
                core::ptr::addr_of_mut!((*s).generation).write(g);
                let next = if i + 1 < usable {
                    (base + i + 1) as u32
                } else {
                    self.free
                };
                core::ptr::addr_of_mut!((*s).next_free).write(next);
            }
            core::ptr::addr_of_mut!((*c).occupied).write(0);
            chunk.assume_init()
        };
        self.chunks.push(chunk);
        self.free = base as u32;
        true
    }

    /// The slot `h` names if it holds the object `h` was made for: one chunk lookup.
    #[inline]
    fn live_slot(&self, h: Handle<T>) -> Option<(&Chunk<T>, usize)> {
        let i = h.index as usize;
        let chunk = self.chunks.get(i / CHUNK_SLOTS)?;
        let si = i % CHUNK_SLOTS;
        (chunk.occupied & (1 << si) != 0 && chunk.slots[si].generation == h.generation.get())
            .then_some((&**chunk, si))
    }

    /// Inserts `value`.
    ///
    /// # Panics
    /// When a fixed pool is full (use [`try_insert`](Pool::try_insert) to get the value back).
    pub fn insert(&mut self, value: T) -> Handle<T> {
        match self.try_insert(value) {
            Ok(h) => h,
            Err(_) => panic!(
                "poolalloc::Pool::insert: the fixed pool is full ({} slots)",
                self.limit
            ),
        }
    }

    /// Inserts `value`, or gives it back when a fixed pool is full.
    #[inline]
    pub fn try_insert(&mut self, value: T) -> Result<Handle<T>, T> {
        if self.free == NONE && !self.enlarge() {
            return Err(value);
        }
        Ok(self
            .try_insert_with(|_| value)
            .unwrap_or_else(|()| unreachable!()))
    }

    /// Inserts the value `f` builds, knowing its handle (for objects that refer to themselves).
    ///
    /// # Panics
    /// When a fixed pool is full.
    pub fn insert_with(&mut self, f: impl FnOnce(Handle<T>) -> T) -> Handle<T> {
        let limit = self.limit;
        self.try_insert_with(f).unwrap_or_else(|()| {
            panic!("poolalloc::Pool::insert_with: the fixed pool is full ({limit} slots)")
        })
    }

    fn try_insert_with(&mut self, f: impl FnOnce(Handle<T>) -> T) -> Result<Handle<T>, ()> {
        if self.free == NONE && !self.enlarge() {
            return Err(());
        }
        let index = self.free;
        let i = index as usize;
        let generation = self.chunks[i / CHUNK_SLOTS].slots[i % CHUNK_SLOTS].generation;
        let handle = Handle {
            index,
            generation: NonZeroU32::new(generation)
                .expect("retired slots are never on the free list"),
            _type: PhantomData,
        };
        // Build first: if `f` panics the pool is unchanged.
        let value = f(handle);
        let chunk = &mut self.chunks[i / CHUNK_SLOTS];
        let slot = &mut chunk.slots[i % CHUNK_SLOTS];
        self.free = slot.next_free;
        slot.value.write(value);
        chunk.occupied |= 1 << (i % CHUNK_SLOTS);
        self.len += 1;
        Ok(handle)
    }

    /// True when `h` names an object in the pool.
    pub fn contains(&self, h: Handle<T>) -> bool {
        self.live_slot(h).is_some()
    }

    /// The object `h` names, or `None` if it was removed (or never was in this pool).
    #[inline]
    pub fn get(&self, h: Handle<T>) -> Option<&T> {
        let (chunk, si) = self.live_slot(h)?;
        // SAFETY: the slot is occupied (live_slot), so its value is initialised.
        Some(unsafe { chunk.slots[si].value.assume_init_ref() })
    }

    /// The object `h` names, mutably.
    pub fn get_mut(&mut self, h: Handle<T>) -> Option<&mut T> {
        if !self.contains(h) {
            return None;
        }
        let i = h.index as usize;
        // SAFETY: the slot is occupied (contains), so its value is initialised.
        Some(unsafe {
            self.chunks[i / CHUNK_SLOTS].slots[i % CHUNK_SLOTS]
                .value
                .assume_init_mut()
        })
    }

    /// Removes and returns the object `h` names. Every handle to it goes stale.
    pub fn remove(&mut self, h: Handle<T>) -> Option<T> {
        let i = h.index as usize;
        let chunk = self.chunks.get_mut(i / CHUNK_SLOTS)?;
        let bit = 1 << (i % CHUNK_SLOTS);
        if chunk.occupied & bit == 0
            || chunk.slots[i % CHUNK_SLOTS].generation != h.generation.get()
        {
            return None;
        }
        chunk.occupied &= !(1 << (i % CHUNK_SLOTS));
        let slot = &mut chunk.slots[i % CHUNK_SLOTS];
        // SAFETY: the slot was occupied; its bit is cleared, so the value is read out exactly once.
        let value = unsafe { slot.value.assume_init_read() };
        self.len -= 1;
        Self::release_slot(slot, &mut self.free, h.index);
        Some(value)
    }

    /// Moves a just-emptied slot to its next generation and onto the free list, or retires it when
    /// the generation would wrap (slotmap#86: a handle must never find a later object).
    fn release_slot(slot: &mut Slot<T>, free: &mut u32, index: u32) {
        if slot.generation == u32::MAX {
            slot.generation = RETIRED;
        } else {
            slot.generation += 1;
            slot.next_free = *free;
            *free = index;
        }
    }

    /// Removes every object; every outstanding handle goes stale.
    pub fn clear(&mut self) {
        self.free = NONE;
        // Rebuild the free list from the last slot down so slot 0 is handed out first again.
        for (ci, chunk) in self.chunks.iter_mut().enumerate().rev() {
            let usable = CHUNK_SLOTS.min(self.limit - ci * CHUNK_SLOTS);
            for si in (0..usable).rev() {
                let slot = &mut chunk.slots[si];
                if chunk.occupied & (1 << si) != 0 {
                    // SAFETY: occupied slots hold initialised values; each is dropped once (the bit is
                    // cleared below before anything else can see it).
                    unsafe { slot.value.assume_init_drop() };
                    chunk.occupied &= !(1 << si);
                    Self::release_slot(slot, &mut self.free, (ci * CHUNK_SLOTS + si) as u32);
                } else if slot.generation != RETIRED {
                    slot.next_free = self.free;
                    self.free = (ci * CHUNK_SLOTS + si) as u32;
                }
            }
        }
        self.len = 0;
    }

    /// Frees the chunks at the end of the pool that hold no object, so their memory goes back to
    /// the allocator. Chunks before an occupied one stay (indices never move). Handles into freed
    /// chunks stay stale forever: a chunk added later starts above every generation they had.
    pub fn shrink_to_fit(&mut self) {
        let mut dropped = false;
        while let Some(c) = self.chunks.last() {
            // A chunk with an object, or with a retired slot (whose index must never come back),
            // stays, and so does everything before it.
            if c.occupied != 0 || c.slots.iter().any(|s| s.generation == RETIRED) {
                break;
            }
            let top = c.slots.iter().map(|s| s.generation).max().unwrap_or(1);
            if top == u32::MAX {
                break;
            }
            self.fresh_generation = self.fresh_generation.max(top + 1);
            self.chunks.pop();
            dropped = true;
        }
        if dropped {
            // Rebuild the free list without the dropped slots.
            self.free = NONE;
            for (ci, chunk) in self.chunks.iter_mut().enumerate().rev() {
                for si in (0..CHUNK_SLOTS.min(self.limit - ci * CHUNK_SLOTS)).rev() {
                    let slot = &mut chunk.slots[si];
                    if chunk.occupied & (1 << si) == 0 && slot.generation != RETIRED {
                        slot.next_free = self.free;
                        self.free = (ci * CHUNK_SLOTS + si) as u32;
                    }
                }
            }
        }
        self.chunks.shrink_to_fit();
    }

    /// The objects and their handles, in slot order.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter {
            pool: self,
            chunk: 0,
            bits: self.chunks.first().map_or(0, |c| c.occupied),
        }
    }

    /// The objects, mutably, and their handles, in slot order.
    pub fn iter_mut(&mut self) -> IterMut<'_, T> {
        IterMut {
            chunks: self.chunks.iter_mut(),
            current: None,
            base: 0,
            bits: 0,
        }
    }
}

impl<T> Drop for Pool<T> {
    fn drop(&mut self) {
        for chunk in &mut self.chunks {
            let mut bits = chunk.occupied;
            while bits != 0 {
                let si = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                // SAFETY: occupied slots hold initialised values, dropped once here.
                unsafe { chunk.slots[si].value.assume_init_drop() };
            }
        }
    }
}

/// Iterator over `(Handle<T>, &T)` in slot order.
pub struct Iter<'a, T> {
    pool: &'a Pool<T>,
    chunk: usize,
    bits: u64,
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = (Handle<T>, &'a T);
    fn next(&mut self) -> Option<Self::Item> {
        while self.bits == 0 {
            self.chunk += 1;
            self.bits = self.pool.chunks.get(self.chunk)?.occupied;
        }
        let si = self.bits.trailing_zeros() as usize;
        self.bits &= self.bits - 1;
        let slot = &self.pool.chunks[self.chunk].slots[si];
        let h = Handle {
            index: (self.chunk * CHUNK_SLOTS + si) as u32,
            generation: NonZeroU32::new(slot.generation)?,
            _type: PhantomData,
        };
        // SAFETY: the slot's occupancy bit is set, so its value is initialised.
        Some((h, unsafe { slot.value.assume_init_ref() }))
    }
}

/// Iterator over `(Handle<T>, &mut T)` in slot order.
pub struct IterMut<'a, T> {
    chunks: core::slice::IterMut<'a, Box<Chunk<T>>>,
    current: Option<&'a mut [Slot<T>; CHUNK_SLOTS]>,
    base: usize,
    bits: u64,
}

impl<'a, T> Iterator for IterMut<'a, T> {
    type Item = (Handle<T>, &'a mut T);
    fn next(&mut self) -> Option<Self::Item> {
        while self.bits == 0 || self.current.is_none() {
            let c = self.chunks.next()?;
            if self.current.is_some() {
                self.base += CHUNK_SLOTS;
            }
            self.bits = c.occupied;
            self.current = Some(&mut c.slots);
        }
        let si = self.bits.trailing_zeros() as usize;
        self.bits &= self.bits - 1;
        let slots = self.current.as_mut()?;
        let slot: *mut Slot<T> = &mut slots[si];
        // SAFETY: each occupied slot is yielded once (its bit is cleared from `bits`), so the
        // mutable references do not alias; they live as long as the pool's mutable borrow.
        let slot = unsafe { &mut *slot };
        let h = Handle {
            index: (self.base + si) as u32,
            generation: NonZeroU32::new(slot.generation)?,
            _type: PhantomData,
        };
        // SAFETY: the occupancy bit was set, so the value is initialised.
        Some((h, unsafe { slot.value.assume_init_mut() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::collections::HashMap;
    use std::rc::Rc;

    #[test]
    fn sizes() {
        assert_eq!(size_of::<Handle<String>>(), 8);
        assert_eq!(size_of::<Option<Handle<String>>>(), 8);
    }

    #[test]
    fn matches_a_model_over_random_operations() {
        let mut x = 12345u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut pool = Pool::new();
        let mut model: HashMap<Handle<u64>, u64> = HashMap::new();
        let mut dead: Vec<Handle<u64>> = Vec::new();
        let steps = if cfg!(miri) { 300 } else { 20_000 };
        for step in 0..steps {
            match rnd() % 6 {
                0..=2 => {
                    let v = rnd();
                    let h = pool.insert(v);
                    assert!(model.insert(h, v).is_none(), "handle reused while live");
                }
                3 if !model.is_empty() => {
                    let h = *model.keys().nth(rnd() as usize % model.len()).unwrap();
                    assert_eq!(pool.remove(h), model.remove(&h));
                    dead.push(h);
                }
                4 if step % 500 == 0 => pool.shrink_to_fit(),
                _ => {
                    if let Some(&h) = dead.get(rnd() as usize % dead.len().max(1)) {
                        assert_eq!(pool.get(h), None, "stale handle found an object");
                    }
                }
            }
            assert_eq!(pool.len(), model.len());
        }
        let mut seen: Vec<(Handle<u64>, u64)> = pool.iter().map(|(h, v)| (h, *v)).collect();
        let mut want: Vec<(Handle<u64>, u64)> = model.iter().map(|(h, v)| (*h, *v)).collect();
        seen.sort();
        want.sort();
        assert_eq!(seen, want);
        for (_, v) in pool.iter_mut() {
            *v = v.wrapping_add(1);
        }
        for (h, v) in &model {
            assert_eq!(pool.get(*h), Some(&v.wrapping_add(1)));
        }
    }

    #[test]
    fn generation_exhaustion_retires_the_slot() {
        let mut pool = Pool::new();
        pool.start_generations_at(NonZeroU32::new(u32::MAX - 2).unwrap());
        let mut handles = Vec::new();
        for _ in 0..5 {
            let h = pool.insert(1u8);
            handles.push(h);
            pool.remove(h);
        }
        // Slot 0 went through generations MAX-2, MAX-1, MAX and was retired; later inserts use
        // other slots, and no old handle finds anything.
        assert_eq!(handles[0].index(), 0);
        assert!(handles[3..].iter().all(|h| h.index() != 0));
        let live = pool.insert(9);
        for h in handles {
            assert_eq!(pool.get(h), None);
        }
        assert_eq!(pool.get(live), Some(&9));
        pool.clear();
        assert!(pool.iter().all(|(h, _)| h.index() != 0));
    }

    #[test]
    fn every_value_is_dropped_exactly_once() {
        struct D(Rc<Cell<usize>>);
        impl Drop for D {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
            }
        }
        let drops = Rc::new(Cell::new(0));
        let mut pool = Pool::new();
        let hs: Vec<_> = (0..200).map(|_| pool.insert(D(drops.clone()))).collect();
        for h in &hs[..50] {
            drop(pool.remove(*h));
        }
        assert_eq!(drops.get(), 50);
        pool.clear();
        assert_eq!(drops.get(), 200);
        for _ in 0..30 {
            pool.insert(D(drops.clone()));
        }
        drop(pool);
        assert_eq!(drops.get(), 230);
    }

    #[test]
    fn fixed_pools_refuse_when_full() {
        let mut pool = Pool::fixed(3);
        for i in 0..3 {
            pool.insert(i);
        }
        assert_eq!(pool.try_insert(7), Err(7));
        assert_eq!(pool.capacity(), 3);
        let h = pool.iter().next().unwrap().0;
        pool.remove(h);
        assert!(pool.try_insert(8).is_ok());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.insert(9)));
        assert!(r.is_err());
    }

    #[test]
    fn shrink_keeps_old_handles_stale() {
        let mut pool = Pool::new();
        let hs: Vec<_> = (0..200).map(|i| pool.insert(i)).collect();
        for h in &hs[64..] {
            pool.remove(*h);
        }
        pool.shrink_to_fit();
        assert_eq!(pool.capacity(), 64);
        let again: Vec<_> = (0..136).map(|i| pool.insert(1000 + i)).collect();
        for h in &hs[64..] {
            assert_eq!(pool.get(*h), None);
        }
        assert!(again.iter().all(|h| pool.contains(*h)));
    }

    #[test]
    fn insert_with_knows_its_handle_and_bits_round_trip() {
        let mut pool: Pool<(u64, String)> = Pool::with_capacity(10);
        assert!(pool.capacity() >= 10);
        let h = pool.insert_with(|h| (h.to_bits(), "me".into()));
        assert_eq!(pool.get(h).unwrap().0, h.to_bits());
        assert_eq!(Handle::<(u64, String)>::from_bits(h.to_bits()), Some(h));
        assert_eq!(Handle::<u8>::from_bits(5), None);
    }

    fn _bounds() {
        fn send<T: Send>() {}
        fn sync<T: Sync>() {}
        send::<Pool<String>>();
        sync::<Pool<String>>();
        send::<Handle<std::rc::Rc<u8>>>();
        sync::<Handle<std::rc::Rc<u8>>>();
    }
}
