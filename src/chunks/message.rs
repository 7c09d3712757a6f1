//! A remote-free message: the frees of one run of a freeing thread into one chunk, written as the
//! slot indices of the run into the run's first slot, so that the freeing thread writes one block
//! per run instead of a link into every block it frees (issue 45, step 3: on Intel each such
//! write took the line from the core that used the block, and the owner then took it back).
//!
//! A message is the run's first slot, `m`:
//!
//! ```text
//!  m + 0        link (word): the next entry of the chunk's remote list, written by the push
//!  m + WORD     (hardened: the free tag, bytes 8..16, left as `on_free` wrote it)
//!  m + OFFSET   u16: k, the indices that follow
//!  m + OFFSET+2 k × u16: the other slots of the run, as (slot - chunk base) / 8
//! ```
//!
//! The chunk's remote list stays a list of entries pushed with one CAS each; in a class that
//! [`carries`] messages every entry is a message (a slot freed alone is a message with k = 0),
//! in the others (the 8-byte class, too small for a count and an index, and the classes of 16 KiB
//! and up, which are freed one a batch) every entry is a slot linked to the next, as before. The
//! list word counts slots, not entries. The owner expands a message into its free list with
//! independent stores (`chunk::collect_remote`), and with `hardened` checks every index first.
//!
//! An index is an offset in 8-byte units: slots start 8-aligned and a chunk's slot area is below
//! 2^18 bytes, so it fits 15 bits, and neither side divides by the slot size.

use super::link;
use crate::base::size_class::{CLASS_SIZE, NUM_CLASSES};

/// Where the count starts: after the link (and with `hardened` after the free tag too, which
/// `hardened`'s double-free check reads while the message waits).
pub const OFFSET: usize = if link::HARDENED {
    16
} else {
    size_of::<usize>()
};

/// The fewest indices worth a message: a class whose first slot holds fewer links its slots.
const MIN_INDICES: usize = 3;

/// The most slots one run holds, in any class (the batch's cap).
pub const MAX_SLOTS: usize = 64;

/// Bytes a run of a class may hold before it goes (the batch's other cap).
pub const MAX_BYTES: usize = 16 << 10;

/// Per class, the indices a message holds besides its own slot; 0 where the class links its slots
/// instead (see the module docs).
pub static INDICES: [u8; NUM_CLASSES] = {
    let mut t = [0u8; NUM_CLASSES];
    let mut c = 0;
    while c < NUM_CLASSES {
        let size = CLASS_SIZE[c];
        let room = if size > OFFSET + 2 {
            (size - OFFSET - 2) / 2
        } else {
            0
        };
        // The run's caps: MAX_SLOTS slots and MAX_BYTES bytes, the message's own slot included.
        let by_bytes = MAX_BYTES / size;
        let mut k = if room < MAX_SLOTS - 1 {
            room
        } else {
            MAX_SLOTS - 1
        };
        if by_bytes < k + 1 {
            k = by_bytes.saturating_sub(1);
        }
        t[c] = if k >= MIN_INDICES { k as u8 } else { 0 };
        c += 1;
    }
    t
};

/// Whether class `c`'s remote frees travel as messages.
#[inline(always)]
pub fn carries(c: usize) -> bool {
    INDICES[c] != 0
}

/// The index of slot `s` in the chunk at `base`.
#[inline(always)]
pub fn index_of(base: *mut u8, s: *mut u8) -> u16 {
    ((s as usize - base as usize) >> 3) as u16
}

/// The slot at index `i` of the chunk at `base` (not checked: see `chunk::collect_remote`).
#[inline(always)]
pub fn slot_at(base: *mut u8, i: u16) -> *mut u8 {
    base.wrapping_add((i as usize) << 3)
}

/// Writes index `i` of message `m` (the message's `i`-th other slot): `s`'s index.
///
/// # Safety
/// `m` must be a free slot of a class that [`carries`] messages, with `i < INDICES[class]`, that
/// the caller owns until its push.
#[inline(always)]
pub unsafe fn set(m: *mut u8, i: usize, index: u16) {
    // SAFETY: OFFSET + 2 + 2i + 2 <= the slot's size (INDICES), and the slot is the caller's;
    // OFFSET is even, so the u16 is aligned.
    unsafe { m.add(OFFSET + 2 + 2 * i).cast::<u16>().write(index) }
}

/// Seals message `m` with its count `k` (the indices written).
///
/// # Safety
/// As [`set`], `k <= INDICES[class]`.
#[inline(always)]
pub unsafe fn seal(m: *mut u8, k: usize) {
    // SAFETY: as in `set`.
    unsafe { m.add(OFFSET).cast::<u16>().write(k as u16) }
}

/// The count of message `m`.
///
/// # Safety
/// `m` must be a sealed message the caller has taken from a remote list.
#[inline(always)]
pub unsafe fn count(m: *mut u8) -> usize {
    // SAFETY: as in `set`, reads only.
    unsafe { m.add(OFFSET).cast::<u16>().read() as usize }
}

/// Index `i` of message `m`.
///
/// # Safety
/// As [`count`], `i < count(m)`.
#[inline(always)]
pub unsafe fn get(m: *mut u8, i: usize) -> u16 {
    // SAFETY: as in `set`, reads only.
    unsafe { m.add(OFFSET + 2 + 2 * i).cast::<u16>().read() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunks::chunk::{CHUNK_SIZE, HEADER_SIZE};

    #[test]
    fn every_message_fits_its_slot_and_the_run_caps() {
        for c in 0..NUM_CLASSES {
            let k = INDICES[c] as usize;
            if k == 0 {
                continue;
            }
            let size = CLASS_SIZE[c];
            assert!(OFFSET + 2 + 2 * k <= size, "class {c}");
            assert!(k < MAX_SLOTS && (k + 1) * size <= MAX_BYTES, "class {c}");
        }
        // The small classes the service and the exchange programs free most carry messages.
        for size in [24, 32, 48, 64, 128, 256, 1024] {
            let c = CLASS_SIZE.iter().position(|&s| s == size).unwrap();
            assert!(carries(c), "{size}-byte class");
        }
        // Indices fit 16 bits: the slot area is below 2^19 bytes.
        assert!((CHUNK_SIZE - HEADER_SIZE) >> 3 <= u16::MAX as usize);
    }
}
