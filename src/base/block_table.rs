//! The block table: a map from block addresses to small values, in memory mapped from the OS
//! (never the global allocator, which its users watch): the `hardened` set of live large blocks,
//! the `testing` counts' table of counted blocks, the profiler's records of sampled blocks.
//!
//! Open addressing with linear probing, at most half full, and backward-shift deletion (no
//! tombstones, so a table that sees many frees does not fill with them). Address 0 marks an
//! empty entry (no block lives there), so a fresh mapping, which reads as zero, is an empty table.
//! It is mapped at the first insertion and doubles when half full; [`BlockTable::clear`] gives
//! the memory back.
//!
//! Not synchronised: each user keeps its table under its own lock or in a thread-local. Not to be
//! confused with the address map (`chunks/addr_map.rs`), one byte per 256 KiB granule of the
//! address space.

// Each user is behind a feature and uses part of the interface (the profiler's only where it
// records: `cfg(poolalloc_profiled)`, set by build.rs).
#![cfg_attr(
    not(all(
        feature = "hardened",
        feature = "testing",
        feature = "profiling",
        target_pointer_width = "64",
        any(target_os = "linux", target_os = "macos", target_os = "freebsd")
    )),
    allow(dead_code)
)]

use crate::os;
use core::ptr;

/// One entry: `addr == 0` marks it empty, and its `value` is then never read.
#[derive(Clone, Copy)]
#[repr(C)]
struct Entry<V> {
    addr: usize,
    value: V,
}

/// Entries of the first mapping.
const FIRST_CAPACITY: usize = 1024;

/// The table could not grow: the OS refused the mapping (`bytes` long).
#[derive(Clone, Copy, Debug)]
pub struct MapFailed {
    pub bytes: usize,
}

/// Addresses (never 0) to values of type `V`.
pub struct BlockTable<V: Copy> {
    entries: *mut Entry<V>,
    /// A power of two, or 0 while nothing is mapped.
    cap: usize,
    len: usize,
}

// SAFETY: the table owns its mapping; whoever holds the table (under a lock, or one thread)
// is the only one who reads or writes it.
unsafe impl<V: Copy + Send> Send for BlockTable<V> {}

impl<V: Copy> BlockTable<V> {
    /// An empty table with nothing mapped.
    pub const fn new() -> Self {
        BlockTable {
            entries: ptr::null_mut(),
            cap: 0,
            len: 0,
        }
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The home entry of `addr` in a table of `cap` entries: Fibonacci hashing (the product's top
    /// bits) of the address without its low bits (blocks are at least 8-aligned, most 16).
    #[inline]
    fn home(addr: usize, cap: usize) -> usize {
        debug_assert!(cap.is_power_of_two() && cap > 1);
        ((addr as u64 >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - cap.trailing_zeros()))
            as usize
    }

    /// Entry `i`.
    ///
    /// # Safety
    /// `i < self.cap` (so the table is mapped).
    #[inline]
    unsafe fn entry_at(&self, i: usize) -> *mut Entry<V> {
        debug_assert!(i < self.cap);
        // SAFETY: i < cap, and cap entries are mapped at `entries` (caller).
        unsafe { self.entries.add(i) }
    }

    /// The entry holding `addr`, or the empty entry that ends its probe run. The table is mapped.
    fn find(&self, addr: usize) -> usize {
        let mut i = Self::home(addr, self.cap);
        loop {
            // SAFETY: i is masked below cap.
            let a = unsafe { (*self.entry_at(i)).addr };
            if a == addr || a == 0 {
                return i;
            }
            i = (i + 1) & (self.cap - 1);
        }
    }

    /// Inserts `addr` with `value`, or replaces its value; returns the value replaced. Fails only
    /// when the table must grow and the OS refuses the memory (the table is then unchanged).
    pub fn insert(&mut self, addr: usize, value: V) -> Result<Option<V>, MapFailed> {
        debug_assert!(addr != 0);
        if (self.len + 1) * 2 > self.cap {
            self.grow()?;
        }
        let i = self.find(addr);
        // SAFETY: i < cap; the table is ours alone (see the type's docs).
        let s = unsafe { &mut *self.entry_at(i) };
        let old = if s.addr == addr {
            Some(s.value)
        } else {
            self.len += 1;
            None
        };
        *s = Entry { addr, value };
        Ok(old)
    }

    /// Removes `addr`, returning its value, if it is in the table.
    pub fn remove(&mut self, addr: usize) -> Option<V> {
        if self.cap == 0 || addr == 0 {
            return None;
        }
        let mask = self.cap - 1;
        let mut hole = self.find(addr);
        // SAFETY: find returns an entry below cap.
        let found = unsafe { *self.entry_at(hole) };
        if found.addr != addr {
            return None;
        }
        // Backward-shift deletion: move each later entry of the probe run into the hole unless its
        // home lies cyclically in (hole, j], so every entry stays reachable from its home.
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            // SAFETY: j is masked below cap.
            let e = unsafe { *self.entry_at(j) };
            if e.addr == 0 {
                break;
            }
            let h = Self::home(e.addr, self.cap);
            let stays = if hole <= j {
                hole < h && h <= j
            } else {
                hole < h || h <= j
            };
            if !stays {
                // SAFETY: hole is below cap (find's, or an earlier masked j); the table is ours.
                unsafe { *self.entry_at(hole) = e };
                hole = j;
            }
        }
        // SAFETY: as above.
        unsafe { (*self.entry_at(hole)).addr = 0 };
        self.len -= 1;
        Some(found.value)
    }

    /// Doubles the table (or maps its first entries), moving every entry.
    fn grow(&mut self) -> Result<(), MapFailed> {
        let cap = (self.cap * 2).max(FIRST_CAPACITY);
        let bytes = cap * size_of::<Entry<V>>();
        let p = os::map(bytes).cast::<Entry<V>>();
        if p.is_null() {
            return Err(MapFailed { bytes });
        }
        // A fresh mapping reads as zero: every entry is empty.
        let old = core::mem::replace(
            self,
            BlockTable {
                entries: p,
                cap,
                len: 0,
            },
        );
        for i in 0..old.cap {
            // SAFETY: i < old.cap, an entry of the old mapping, still mapped.
            let e = unsafe { *old.entry_at(i) };
            if e.addr != 0 {
                let j = self.find(e.addr);
                // SAFETY: j < cap; the new mapping is ours alone.
                unsafe { *self.entry_at(j) = e };
                self.len += 1;
            }
        }
        old.unmap();
        Ok(())
    }

    /// Gives the mapping back (the table must not be used after, but for dropping it).
    fn unmap(self) {
        if self.cap != 0 {
            // SAFETY: the mapping was made by `grow` with this size, and `self` (its only
            // reference) is consumed here.
            unsafe { os::unmap(self.entries.cast(), self.cap * size_of::<Entry<V>>()) };
        }
    }

    /// Forgets every entry and gives the memory back.
    pub fn clear(&mut self) {
        core::mem::take(self).unmap();
    }

    /// Calls `f` with every entry, in no particular order.
    pub fn for_each(&self, mut f: impl FnMut(usize, V)) {
        for i in 0..self.cap {
            // SAFETY: i < cap; a value is read only from an entry that is in use.
            let s = unsafe { *self.entry_at(i) };
            if s.addr != 0 {
                f(s.addr, s.value);
            }
        }
    }
}

impl<V: Copy> Default for BlockTable<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Copy> core::fmt::Debug for BlockTable<V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BlockTable")
            .field("len", &self.len)
            .field("cap", &self.cap)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inserts and removes against a model (a plain list), through growth and many deletions that
    /// shift probe runs, with addresses that collide in their low bits.
    #[test]
    fn the_table_agrees_with_a_model() {
        let mut t = BlockTable::<u64>::new();
        let mut model: std::vec::Vec<(usize, u64)> = std::vec::Vec::new();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let addr = ((x as usize % 3000) + 1) << 12; // page-aligned: low bits all zero
            if x % 3 == 0 {
                let want = model.iter().position(|&(a, _)| a == addr);
                let got = t.remove(addr);
                match want {
                    Some(i) => assert_eq!(got, Some(model.swap_remove(i).1)),
                    None => assert!(got.is_none()),
                }
            } else {
                let old = t.insert(addr, step).unwrap();
                match model.iter_mut().find(|(a, _)| *a == addr) {
                    Some(e) => assert_eq!(old, Some(core::mem::replace(&mut e.1, step))),
                    None => {
                        assert!(old.is_none());
                        model.push((addr, step));
                    }
                }
            }
            assert_eq!(t.len(), model.len());
        }
        let mut seen = 0;
        t.for_each(|a, v| {
            assert!(model.contains(&(a, v)));
            seen += 1;
        });
        assert_eq!(seen, model.len());
        for &(addr, v) in &model {
            assert_eq!(t.remove(addr), Some(v));
        }
        assert_eq!(t.len(), 0);
        t.clear();
        assert!(t.remove(4096).is_none());
    }
}
