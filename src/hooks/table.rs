//! The per-thread set of blocks a running [`count`](super::count) allocated: address → (requested
//! size, sequence number of the allocation). An open-addressing hash table with linear probing and
//! backward-shift deletion, in memory mapped from the OS (never the global allocator, which is what
//! it watches). It is mapped on the first insertion and unmapped when the outermost count ends.
//!
//! Cost: 24 bytes per entry, at most half the slots used (so 48 bytes per live counted block, in
//! pages touched only as needed), one hash and a short probe per allocation, free and reallocation
//! while a count runs, and an `mmap`/`munmap` pair per outermost count that allocated anything.

use crate::os;
use core::cell::Cell;
use core::ptr;

/// One slot. `addr == 0` marks an empty slot (no block lives at address 0).
#[derive(Clone, Copy)]
pub struct Entry {
    pub addr: usize,
    pub size: usize,
    pub seq: u64,
}

const EMPTY: Entry = Entry {
    addr: 0,
    size: 0,
    seq: 0,
};
const FIRST_CAPACITY: usize = 1024;

/// The table's fields, in `Cell`s so a const-initialised thread-local can hold it (no destructor).
pub struct Table {
    slots: Cell<*mut Entry>,
    /// Power of two, or 0 while nothing is mapped.
    cap: Cell<usize>,
    len: Cell<usize>,
}

impl Table {
    pub const fn new() -> Self {
        Table {
            slots: Cell::new(ptr::null_mut()),
            cap: Cell::new(0),
            len: Cell::new(0),
        }
    }

    #[inline]
    fn home(addr: usize, cap: usize) -> usize {
        // Fibonacci hashing of the address without its always-zero low bits.
        // (In 64 bits: the hash works on any pointer width.)
        (((addr as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize) & (cap - 1)
    }

    #[inline]
    fn slot(&self, i: usize) -> *mut Entry {
        // SAFETY: callers pass i < cap, and cap slots are mapped at `slots`.
        unsafe { self.slots.get().add(i) }
    }

    /// Inserts or replaces the entry for `e.addr` (a replaced entry was a block another thread
    /// freed; its address came back to this thread).
    pub fn insert(&self, e: Entry) {
        debug_assert!(e.addr != 0);
        if (self.len.get() + 1) * 2 > self.cap.get() {
            self.grow();
        }
        let cap = self.cap.get();
        let mut i = Self::home(e.addr, cap);
        loop {
            let s = self.slot(i);
            // SAFETY: s is one of the table's mapped slots (i < cap).
            let cur = unsafe { (*s).addr };
            if cur == 0 || cur == e.addr {
                if cur == 0 {
                    self.len.set(self.len.get() + 1);
                }
                // SAFETY: as above; this thread alone uses the table.
                unsafe { *s = e };
                return;
            }
            i = (i + 1) & (cap - 1);
        }
    }

    /// Removes and returns the entry for `addr`, if there is one.
    pub fn remove(&self, addr: usize) -> Option<Entry> {
        let cap = self.cap.get();
        if cap == 0 || addr == 0 {
            return None;
        }
        let mut i = Self::home(addr, cap);
        let found = loop {
            // SAFETY: i < cap: a mapped slot.
            let cur = unsafe { *self.slot(i) };
            if cur.addr == 0 {
                return None;
            }
            if cur.addr == addr {
                break cur;
            }
            i = (i + 1) & (cap - 1);
        };
        // Backward-shift deletion: move later entries of the probe run into the hole when their home
        // does not lie cyclically in (hole, j], so every entry stays reachable from its home.
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & (cap - 1);
            // SAFETY: j < cap.
            let e = unsafe { *self.slot(j) };
            if e.addr == 0 {
                break;
            }
            let h = Self::home(e.addr, cap);
            let stays = if hole <= j {
                hole < h && h <= j
            } else {
                hole < h || h <= j
            };
            if !stays {
                // SAFETY: hole and j are mapped slots.
                unsafe { *self.slot(hole) = e };
                hole = j;
            }
        }
        // SAFETY: hole < cap.
        unsafe { *self.slot(hole) = EMPTY };
        self.len.set(self.len.get() - 1);
        Some(found)
    }

    fn grow(&self) {
        let (old, old_cap) = (self.slots.get(), self.cap.get());
        let cap = if old_cap == 0 {
            FIRST_CAPACITY
        } else {
            old_cap * 2
        };
        let p = os::map(cap * size_of::<Entry>()).cast::<Entry>();
        if p.is_null() {
            crate::fatal::fatal(format_args!(
                "testing::count could not map {} bytes for its table of live blocks",
                cap * size_of::<Entry>()
            ));
        }
        // Fresh mappings read as zero: every slot is empty.
        self.slots.set(p);
        self.cap.set(cap);
        self.len.set(0);
        for i in 0..old_cap {
            // SAFETY: i < old_cap, a slot of the old mapping, still mapped.
            let e = unsafe { *old.add(i) };
            if e.addr != 0 {
                self.insert(e);
            }
        }
        if old_cap != 0 {
            // SAFETY: the old mapping was made above with this size and is no longer referenced.
            unsafe { os::unmap(old.cast(), old_cap * size_of::<Entry>()) };
        }
    }

    /// Forgets every entry and gives the memory back.
    pub fn clear(&self) {
        let cap = self.cap.get();
        if cap != 0 {
            // SAFETY: the mapping was made by `grow` with this size; nothing refers to it after this.
            unsafe { os::unmap(self.slots.get().cast(), cap * size_of::<Entry>()) };
        }
        self.slots.set(ptr::null_mut());
        self.cap.set(0);
        self.len.set(0);
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inserts and removes against a model (a plain list), through growth and many deletions that
    /// shift probe runs, with addresses that collide in their low bits.
    #[test]
    fn the_table_agrees_with_a_model() {
        let t = Table::new();
        let mut model: std::vec::Vec<(usize, usize)> = std::vec::Vec::new();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for step in 0..20_000usize {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let addr = ((x as usize % 3000) + 1) << 12; // page-aligned: low bits all zero
            if x % 3 == 0 {
                let want = model.iter().position(|&(a, _)| a == addr);
                let got = t.remove(addr);
                match want {
                    Some(i) => {
                        let (_, size) = model.swap_remove(i);
                        assert_eq!(got.map(|e| (e.addr, e.size)), Some((addr, size)));
                    }
                    None => assert!(got.is_none()),
                }
            } else {
                t.insert(Entry {
                    addr,
                    size: step,
                    seq: step as u64,
                });
                match model.iter_mut().find(|(a, _)| *a == addr) {
                    Some(e) => e.1 = step,
                    None => model.push((addr, step)),
                }
            }
            assert_eq!(t.len(), model.len());
        }
        for &(addr, size) in &model {
            assert_eq!(t.remove(addr).map(|e| e.size), Some(size));
        }
        assert_eq!(t.len(), 0);
        t.clear();
        assert!(t.remove(4096).is_none());
    }
}
