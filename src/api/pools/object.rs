//! Typed object pools with generational handles: the `object_pool<T>` of Om (the C++ engine this
//! project's seeds come from: groups that never move, freed slots daisy-chained into a free list)
//! with the slot seeds of GTA's entity pools (the *Grand Theft Auto* engines: a handle carries the
//! slot's generation, so a handle to a removed object never finds a later one). Both words are in
//! the crate docs' glossary; a *slot* here is always a slot of the pool, not of a size class.
//!
//! A pool is a table of pointers to groups of [`GROUP_SLOTS`] slots. Each group is one block from
//! [`PoolAlloc`] (whatever the global allocator is: typed pools sit on the allocator's size-class
//! pools, so a dropped group is reused at once by the next pool that grows, and `stats()` counts
//! it) and never moves, so objects never move once inserted. A new group is carved lazily:
//! its slots are handed out in order, and only freed slots go on the free list.
//!
//! A slot's generation is odd while it holds an object and even while it is free (slotmap's
//! scheme), so `get` checks a handle with one compare in the slot it already loads. Each group
//! also keeps a 64-bit occupancy word: iteration visits occupied slots only, by counting trailing
//! zeros, so a sparse pool iterates fast.

use core::alloc::{GlobalAlloc, Layout};
use core::fmt;
use core::hash::{Hash, Hasher};
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::num::NonZeroU32;
use core::ptr::{NonNull, addr_of, addr_of_mut};

/// Where groups come from: the allocator's own pools. Miri runs these tests on System instead,
/// because it cannot model the partial munmap with which the OS layer trims a region's alignment
/// slack.
#[cfg(not(miri))]
const GROUPS: crate::PoolAlloc = crate::PoolAlloc::new();
#[cfg(miri)]
const GROUPS: std::alloc::System = std::alloc::System;

/// Slots per group: one occupancy word's worth.
pub const GROUP_SLOTS: usize = 64;

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

    /// A handle from [`to_bits`](Handle::to_bits); `None` if the generation half is not one a
    /// handle can have (handles' generations are odd).
    pub fn from_bits(bits: u64) -> Option<Handle<T>> {
        let generation = (bits >> 32) as u32;
        if generation % 2 == 0 {
            return None;
        }
        Some(Handle {
            index: bits as u32,
            generation: NonZeroU32::new(generation)?,
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
    /// Odd while the slot holds a value (the generation of the handles to it); even while it is
    /// free (its last generation plus one). [`RETIRED`] once the generation would wrap: the slot is
    /// never used again. Written when the slot is first handed out.
    generation: u32,
    /// Next free slot (valid while the slot is free and on the free list).
    next_free: u32,
}

/// The generation of a slot that may not be reused (even, so it never matches a handle).
const RETIRED: u32 = 0;

/// One entry of a pool's group table: the group's slots (one allocation that never moves) and its
/// occupancy word, side by side, so an insert or remove updates the word in the table entry it
/// has already loaded to find the slot, and a sparse iteration reads only the table.
struct Group<T> {
    slots: NonNull<Slot<T>>,
    /// Bit i set iff slot i holds a value.
    occupied: u64,
}

impl<T> Group<T> {
    /// The layout of a group's slots.
    fn layout() -> Layout {
        Layout::array::<Slot<T>>(GROUP_SLOTS).expect("poolalloc::Pool: the type is too large")
    }
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
    /// The groups, each its own allocation (so objects never move); index `i` lives in group
    /// `i / GROUP_SLOTS`.
    groups: Vec<Group<T>>,
    /// Head of the free list of slot indices (`NONE` when empty). Every index on it is below `fresh`.
    free: u32,
    /// Slots at `fresh` and above have never been handed out (their fields are unwritten): a new
    /// group is carved lazily, a slot at a time, instead of being daisy-chained in one pass.
    fresh: u32,
    /// Slots the pool has now: `min(groups.len() * GROUP_SLOTS, limit)`.
    cap: u32,
    len: usize,
    /// Slots that may ever exist; `usize::MAX` for a growable pool.
    limit: usize,
    /// Generation (odd) of the first object in a never-used slot: above every generation a dropped
    /// group had, so handles into groups freed by `shrink_to_fit` stay stale when the index range
    /// is grown again.
    first_generation: u32,
    _owns: PhantomData<T>,
}

// SAFETY: a Pool owns its values like a Vec<T>; moving it moves them.
unsafe impl<T: Send> Send for Pool<T> {}
// SAFETY: shared access only hands out &T.
unsafe impl<T: Sync> Sync for Pool<T> {}

/// The live objects by handle, in slot order (as `iter` visits them).
impl<T: fmt::Debug> fmt::Debug for Pool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Pool<T> {
    /// An empty pool that grows a group at a time.
    pub fn new() -> Self {
        Pool {
            groups: Vec::new(),
            free: NONE,
            fresh: 0,
            cap: 0,
            len: 0,
            limit: usize::MAX,
            first_generation: 1,
            _owns: PhantomData,
        }
    }

    /// A growable pool with room for `n` objects before it grows.
    pub fn with_capacity(n: usize) -> Self {
        let mut p = Self::new();
        p.groups.reserve(n.div_ceil(GROUP_SLOTS));
        while p.capacity() < n && p.enlarge() {}
        p
    }

    /// A pool of exactly `n` slots that never grows: [`insert`](Pool::insert) panics and
    /// [`try_insert`](Pool::try_insert) gives the value back when it is full.
    pub fn fixed(n: usize) -> Self {
        let mut p = Self::new();
        p.limit = n;
        p.groups.reserve_exact(n.div_ceil(GROUP_SLOTS));
        while p.capacity() < n && p.enlarge() {}
        p
    }

    #[doc(hidden)]
    /// Testing hook: never-used slots get generation `g` (rounded up to odd) for their first
    /// object, to reach generation exhaustion without 2^31 reuses.
    pub fn start_generations_at(&mut self, g: NonZeroU32) {
        self.first_generation = g.get() | 1;
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
        self.cap as usize
    }

    /// Adds a group (the Om `enlarge()`); its slots are handed out from `fresh` on.
    #[cold]
    fn enlarge(&mut self) -> bool {
        let base = self.groups.len() * GROUP_SLOTS;
        if base >= self.limit || base + GROUP_SLOTS > NONE as usize {
            return false;
        }
        let layout = Group::<T>::layout();
        // SAFETY: a slot has a non-zero size (its two u32 fields). Its fields stay unwritten until
        // `fresh` passes them.
        let raw = unsafe { GROUPS.alloc(layout) }.cast::<Slot<T>>();
        let Some(slots) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        self.groups.push(Group { slots, occupied: 0 });
        self.cap = (base + GROUP_SLOTS).min(self.limit) as u32;
        true
    }

    /// Slot `i`.
    ///
    /// # Safety
    /// `i < self.cap`.
    #[inline(always)]
    unsafe fn slot(&self, i: u32) -> *mut Slot<T> {
        let i = i as usize;
        // SAFETY: i < cap <= groups.len() * GROUP_SLOTS (caller), so the group exists; the slot
        // index is below GROUP_SLOTS.
        unsafe {
            self.groups
                .get_unchecked(i / GROUP_SLOTS)
                .slots
                .as_ptr()
                .add(i % GROUP_SLOTS)
        }
    }

    /// The occupancy word of slot `i`'s group.
    ///
    /// # Safety
    /// `i < self.cap`.
    #[inline(always)]
    unsafe fn occupied(&mut self, i: u32) -> &mut u64 {
        // SAFETY: as in `slot`.
        unsafe {
            &mut self
                .groups
                .get_unchecked_mut(i as usize / GROUP_SLOTS)
                .occupied
        }
    }

    /// The slot `h` names if it holds the object `h` was made for: a bounds check, one group
    /// pointer and one generation compare (a handle's generation is odd, a free slot's even).
    #[inline(always)]
    fn live_slot(&self, h: Handle<T>) -> Option<*mut Slot<T>> {
        if h.index >= self.fresh {
            return None;
        }
        // SAFETY: index < fresh <= cap; slots below `fresh` have their generation written.
        let s = unsafe { self.slot(h.index) };
        // SAFETY: as above.
        (unsafe { addr_of!((*s).generation).read() } == h.generation.get()).then_some(s)
    }

    /// The slot the next insert takes, and its generation; `None` when a fixed pool is full.
    #[inline(always)]
    fn next_slot(&mut self) -> Option<(u32, u32)> {
        if self.free != NONE {
            // SAFETY: free-list indices are below `fresh`; a free slot's generation is even, and
            // never u32::MAX, so adding one gives the (odd) generation of its next object.
            let g = unsafe { addr_of!((*self.slot(self.free)).generation).read() } + 1;
            return Some((self.free, g));
        }
        if self.fresh == self.cap && !self.enlarge() {
            return None;
        }
        Some((self.fresh, self.first_generation))
    }

    /// Stores `value` in the slot [`next_slot`](Pool::next_slot) chose.
    #[inline(always)]
    fn fill(&mut self, index: u32, generation: u32, value: T) -> Handle<T> {
        // SAFETY: `index` is the free-list head or `fresh`, both below cap.
        unsafe {
            let s = self.slot(index);
            if index == self.fresh {
                self.fresh += 1;
            } else {
                self.free = addr_of!((*s).next_free).read();
            }
            addr_of_mut!((*s).generation).write(generation);
            addr_of_mut!((*s).value).cast::<T>().write(value);
            *self.occupied(index) |= 1 << (index as usize % GROUP_SLOTS);
        }
        self.len += 1;
        Handle {
            index,
            // SAFETY: generations handed out are odd, so never zero.
            generation: unsafe { NonZeroU32::new_unchecked(generation) },
            _type: PhantomData,
        }
    }

    /// Inserts `value`.
    ///
    /// # Panics
    /// When a fixed pool is full (use [`try_insert`](Pool::try_insert) to get the value back).
    #[inline]
    pub fn insert(&mut self, value: T) -> Handle<T> {
        if self.free != NONE {
            return self.insert_free(value);
        }
        match self.next_slot() {
            Some((i, g)) => self.fill(i, g, value),
            None => self.full("insert"),
        }
    }

    /// Insert into the free-list head (the common case once objects have been removed): one
    /// group-table entry and one slot, each addressed once.
    #[inline(always)]
    fn insert_free(&mut self, value: T) -> Handle<T> {
        let index = self.free;
        // SAFETY: free-list indices are below `fresh` <= cap, so the entry exists and the slot's
        // fields are written; a free slot's generation is even and below u32::MAX.
        unsafe {
            let e = self.groups.as_mut_ptr().add(index as usize / GROUP_SLOTS);
            let s = (*e).slots.as_ptr().add(index as usize % GROUP_SLOTS);
            self.free = addr_of!((*s).next_free).read();
            let generation = addr_of!((*s).generation).read() + 1;
            addr_of_mut!((*s).generation).write(generation);
            addr_of_mut!((*s).value).cast::<T>().write(value);
            (*e).occupied |= 1 << (index as usize % GROUP_SLOTS);
            self.len += 1;
            Handle {
                index,
                generation: NonZeroU32::new_unchecked(generation),
                _type: PhantomData,
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn full(&self, what: &str) -> ! {
        panic!(
            "poolalloc::Pool::{what}: the fixed pool is full ({} slots)",
            self.limit
        )
    }

    /// Inserts `value`, or gives it back when a fixed pool is full.
    #[inline]
    pub fn try_insert(&mut self, value: T) -> Result<Handle<T>, T> {
        match self.next_slot() {
            Some((i, g)) => Ok(self.fill(i, g, value)),
            None => Err(value),
        }
    }

    /// Inserts the value `f` builds, knowing its handle (for objects that refer to themselves).
    /// If `f` panics the pool is unchanged.
    ///
    /// # Panics
    /// When a fixed pool is full.
    pub fn insert_with(&mut self, f: impl FnOnce(Handle<T>) -> T) -> Handle<T> {
        let Some((index, generation)) = self.next_slot() else {
            self.full("insert_with")
        };
        let handle = Handle {
            index,
            // SAFETY: generations handed out are odd.
            generation: unsafe { NonZeroU32::new_unchecked(generation) },
            _type: PhantomData,
        };
        let value = f(handle);
        self.fill(index, generation, value)
    }

    /// True when `h` names an object in the pool.
    pub fn contains(&self, h: Handle<T>) -> bool {
        self.live_slot(h).is_some()
    }

    /// The object `h` names, or `None` if it was removed (or never was in this pool).
    #[inline]
    pub fn get(&self, h: Handle<T>) -> Option<&T> {
        let s = self.live_slot(h)?;
        // SAFETY: the slot's generation is the handle's (odd), so it is occupied and its value
        // initialised; &self keeps it from being removed while the reference lives.
        Some(unsafe { (*s).value.assume_init_ref() })
    }

    /// The object `h` names, mutably.
    #[inline]
    pub fn get_mut(&mut self, h: Handle<T>) -> Option<&mut T> {
        let s = self.live_slot(h)?;
        // SAFETY: occupied as in `get`; &mut self makes the reference unique.
        Some(unsafe { (*s).value.assume_init_mut() })
    }

    /// Removes and returns the object `h` names. Every handle to it goes stale.
    #[inline]
    pub fn remove(&mut self, h: Handle<T>) -> Option<T> {
        let index = h.index;
        if index >= self.fresh {
            return None;
        }
        // SAFETY: index < fresh <= cap, so the entry exists and the slot's generation is written.
        // A matching (odd) generation means the slot is occupied; the generation moves on below,
        // so the value is read out exactly once.
        unsafe {
            let e = self.groups.as_mut_ptr().add(index as usize / GROUP_SLOTS);
            let s = (*e).slots.as_ptr().add(index as usize % GROUP_SLOTS);
            let g = addr_of!((*s).generation).read();
            if g != h.generation.get() {
                return None;
            }
            (*e).occupied &= !(1 << (index as usize % GROUP_SLOTS));
            let value = addr_of!((*s).value).cast::<T>().read();
            if g == u32::MAX {
                addr_of_mut!((*s).generation).write(RETIRED);
            } else {
                addr_of_mut!((*s).generation).write(g + 1);
                addr_of_mut!((*s).next_free).write(self.free);
                self.free = index;
            }
            self.len -= 1;
            Some(value)
        }
    }

    /// Moves a just-emptied slot to its next (even) generation and onto the free list, or retires
    /// it when the generation would wrap (slotmap#86: a handle must never find a later object).
    ///
    /// # Safety
    /// `s` is slot `index`, which held a value (odd generation) and no longer does.
    #[inline(always)]
    unsafe fn release(&mut self, s: *mut Slot<T>, index: u32) {
        // SAFETY: caller.
        unsafe {
            let g = addr_of!((*s).generation).read();
            if g == u32::MAX {
                addr_of_mut!((*s).generation).write(RETIRED);
            } else {
                addr_of_mut!((*s).generation).write(g + 1);
                addr_of_mut!((*s).next_free).write(self.free);
                self.free = index;
            }
        }
    }

    /// Removes every object; every outstanding handle goes stale.
    pub fn clear(&mut self) {
        self.free = NONE;
        // Rebuild the free list from the last used slot down, so slot 0 is handed out first again.
        for i in (0..self.fresh).rev() {
            let bit = 1 << (i as usize % GROUP_SLOTS);
            // SAFETY: i < fresh <= cap; slots below `fresh` have their fields written, and an
            // occupied one (bit set) holds a value, dropped once here (its bit is cleared first).
            unsafe {
                let s = self.slot(i);
                let occupied = self.occupied(i);
                if *occupied & bit != 0 {
                    *occupied &= !bit;
                    // A panicking drop leaks the rest (their bits stay set, the pool stays sound).
                    addr_of_mut!((*s).value).cast::<T>().drop_in_place();
                    self.release(s, i);
                } else if addr_of!((*s).generation).read() != RETIRED {
                    addr_of_mut!((*s).next_free).write(self.free);
                    self.free = i;
                }
            }
        }
        self.len = 0;
    }

    /// Frees the groups at the end of the pool that hold no object, so their memory goes back to
    /// the allocator. Groups before an occupied one stay (indices never move). Handles into freed
    /// groups stay stale forever: a group added later starts above every generation they had.
    pub fn shrink_to_fit(&mut self) {
        let mut dropped = false;
        while let Some(last) = self.groups.last() {
            let base = (self.groups.len() - 1) * GROUP_SLOTS;
            if last.occupied != 0 {
                break;
            }
            let last = last.slots;
            // The used slots of this group: a retired one (whose index must never come back) keeps
            // the group, and so does everything before it.
            let used = (base as u32)..self.fresh.max(base as u32);
            // SAFETY: used slots are below fresh, which is at most this group's end (it is lowered
            // as groups are dropped), with their generation written.
            let gens = used.map(|i| unsafe { addr_of!((*self.slot(i)).generation).read() });
            let mut top = 0;
            let mut retired = false;
            for g in gens {
                retired |= g == RETIRED;
                top = top.max(g);
            }
            if retired {
                break;
            }
            // Free slots have even generations below u32::MAX, so top + 1 is odd and fits.
            self.first_generation = self.first_generation.max(top + 1);
            self.groups.pop();
            self.fresh = self.fresh.min(base as u32);
            // SAFETY: the group came from GROUPS with this layout in `enlarge`; it holds no value.
            unsafe { GROUPS.dealloc(last.as_ptr().cast(), Group::<T>::layout()) };
            dropped = true;
        }
        if dropped {
            self.cap = (self.groups.len() * GROUP_SLOTS).min(self.limit) as u32;
            // Rebuild the free list without the dropped slots.
            self.free = NONE;
            for i in (0..self.fresh).rev() {
                // SAFETY: i < fresh <= cap, generation written.
                unsafe {
                    let s = self.slot(i);
                    let g = addr_of!((*s).generation).read();
                    if g % 2 == 0 && g != RETIRED {
                        addr_of_mut!((*s).next_free).write(self.free);
                        self.free = i;
                    }
                }
            }
        }
        self.groups.shrink_to_fit();
    }

    /// The objects and their handles, in slot order.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter {
            cursor: Cursor::new(self),
            _pool: PhantomData,
        }
    }

    /// The objects, mutably, and their handles, in slot order.
    pub fn iter_mut(&mut self) -> IterMut<'_, T> {
        IterMut {
            cursor: Cursor::new(self),
            _pool: PhantomData,
        }
    }
}

impl<T> Drop for Pool<T> {
    fn drop(&mut self) {
        for group in &self.groups {
            // SAFETY: each group is live and came from GROUPS with this layout; occupied slots
            // hold initialised values, dropped once here before the group is freed.
            unsafe {
                let mut bits = if core::mem::needs_drop::<T>() {
                    group.occupied
                } else {
                    0
                };
                while bits != 0 {
                    let si = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    group.slots.as_ptr().add(si).cast::<T>().drop_in_place();
                }
                GROUPS.dealloc(group.slots.as_ptr().cast(), Group::<T>::layout());
            }
        }
    }
}

/// The walk both iterators share: the occupied slots, in slot order, through the occupancy words.
struct Cursor<'a, T> {
    groups: core::slice::Iter<'a, Group<T>>,
    /// Slots of the current group.
    slots: *mut Slot<T>,
    next_base: u32,
    base: u32,
    /// Occupied slots of the current group not yet visited.
    bits: u64,
    /// Objects not yet visited: the walk stops at the last one.
    left: usize,
}

impl<'a, T> Cursor<'a, T> {
    fn new(pool: &'a Pool<T>) -> Self {
        Cursor {
            groups: pool.groups.iter(),
            slots: core::ptr::null_mut(),
            next_base: 0,
            base: 0,
            bits: 0,
            left: pool.len,
        }
    }

    /// The next occupied slot and the handle to its object.
    #[inline(always)]
    fn next(&mut self) -> Option<(Handle<T>, *mut Slot<T>)> {
        if self.left == 0 {
            return None;
        }
        while self.bits == 0 {
            let c = self.groups.next()?;
            self.bits = c.occupied;
            self.slots = c.slots.as_ptr();
            self.base = self.next_base;
            self.next_base += GROUP_SLOTS as u32;
        }
        let si = self.bits.trailing_zeros();
        self.bits &= self.bits - 1;
        self.left -= 1;
        // SAFETY: the slot's occupancy bit was set, so it lies in the group and its generation is
        // written (odd, so non-zero).
        unsafe {
            let s = self.slots.add(si as usize);
            let h = Handle {
                index: self.base + si,
                generation: NonZeroU32::new_unchecked(addr_of!((*s).generation).read()),
                _type: PhantomData,
            };
            Some((h, s))
        }
    }
}

/// Iterator over `(Handle<T>, &T)` in slot order.
pub struct Iter<'a, T> {
    cursor: Cursor<'a, T>,
    _pool: PhantomData<&'a Pool<T>>,
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = (Handle<T>, &'a T);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (h, s) = self.cursor.next()?;
        // SAFETY: the slot is occupied, so its value is initialised; the pool is borrowed for 'a.
        Some((h, unsafe { (*s).value.assume_init_ref() }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.cursor.left, Some(self.cursor.left))
    }
}

impl<T> ExactSizeIterator for Iter<'_, T> {}

impl<T> fmt::Debug for Iter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Iter")
            .field("left", &self.cursor.left)
            .finish()
    }
}

/// Iterator over `(Handle<T>, &mut T)` in slot order.
pub struct IterMut<'a, T> {
    cursor: Cursor<'a, T>,
    _pool: PhantomData<&'a mut Pool<T>>,
}

impl<'a, T> Iterator for IterMut<'a, T> {
    type Item = (Handle<T>, &'a mut T);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (h, s) = self.cursor.next()?;
        // SAFETY: the slot is occupied, so its value is initialised; each slot is visited once, so
        // the mutable references do not alias, and they live as long as the pool's mutable borrow.
        Some((h, unsafe { (*s).value.assume_init_mut() }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.cursor.left, Some(self.cursor.left))
    }
}

impl<T> ExactSizeIterator for IterMut<'_, T> {}

impl<T> fmt::Debug for IterMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IterMut")
            .field("left", &self.cursor.left)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_the_live_objects_by_handle() {
        let mut pool = Pool::new();
        let a = pool.insert("a");
        let b = pool.insert("b");
        pool.remove(a);
        assert_eq!(format!("{pool:?}"), format!("{{{b:?}: \"b\"}}"));
        assert_eq!(format!("{:?}", pool.iter()), "Iter { left: 1 }");
        assert_eq!(format!("{:?}", pool.iter_mut()), "IterMut { left: 1 }");
    }
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
        // Where a panic aborts (wasm32), the panic of `insert` cannot be caught.
        #[cfg(panic = "unwind")]
        {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.insert(9)));
            assert!(r.is_err());
        }
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
        // Even generations belong to free slots: no handle has one.
        assert_eq!(Handle::<u8>::from_bits(2 << 32), None);
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
