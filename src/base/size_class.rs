//! The size-class table: which slot size serves a request, and what that costs.
//!
//! Classes are 8, 16, 24, …, 64 bytes (steps of 8), then four classes per doubling:
//! `5·2^(b-2), 6·2^(b-2), 7·2^(b-2), 8·2^(b-2)` for every `2^b` from 64 up to 32 KiB, ending at
//! [`MAX_SMALL`] = 64 KiB. That is [`NUM_CLASSES`] = 48 classes.
//!
//! **Waste bound.** Above 64 B a request `r` in `(2^b, 2^(b+1)]` gets the next multiple of
//! `2^(b-2)`, so the unused tail of a slot is at most `2^(b-2) - 1` bytes: under 20% of the slot and
//! under 25% of the request (worst case `r = 2^b + 1`, e.g. 65 B in an 80 B slot). At or below 64 B
//! the tail is at most 7 bytes.
//!
//! **Alignment.** Chunks are aligned to their size (256 KiB) and slot `i` of a chunk starts at
//! `chunk + i·size`, so a slot is aligned to the largest power of two dividing its class size. A
//! request with alignment `a > 8` is looked up as `round_up(size, a)`; the class found is then always
//! a multiple of `a` (the classes between `2^b` and `2^(b+1)` are multiples of `2^(b-2)`, and a
//! rounded size in that range with `a > 2^(b-2)` is `3·2^(b-1)` or `2^(b+1)`, both classes). So every
//! alignment up to 64 KiB is served from the pools; larger ones take the large-block path.

/// Number of size classes.
pub const NUM_CLASSES: usize = 48;
/// The largest request (after rounding up to its alignment) served from a pool.
pub const MAX_SMALL: usize = 64 * 1024;
/// Sizes up to this are looked up in a table; above it a few bit operations find the class.
const TABLE_MAX: usize = 1024;
/// The largest size of the common case ([`class_of_common`]): aligned to at most 8, at most 1 KiB.
/// A thread's heap finds the current chunk of such a size with one load indexed by the size.
pub const COMMON_MAX: usize = TABLE_MAX;
/// Index of the first class above 64 B (the 80 B class).
const FIRST_SPACED: usize = 8;

/// The slot size of class `c` (the formula the table is built from; `region` builds its own
/// compact tables from it too).
pub const fn class_size_of(c: usize) -> usize {
    if c < FIRST_SPACED {
        (c + 1) * 8
    } else {
        let k = c - FIRST_SPACED;
        let b = 6 + k / 4;
        (5 + k % 4) << (b - 2)
    }
}

/// The class of a size `s` in `1..=MAX_SMALL` (computed; the table below caches it for small sizes).
pub const fn class_of_size_computed(s: usize) -> usize {
    if s <= 64 {
        if s == 0 { 0 } else { (s - 1) / 8 }
    } else {
        let s1 = s - 1;
        let b = (usize::BITS - 1 - s1.leading_zeros()) as usize; // floor(log2(s - 1)) ≥ 6
        let q = (s1 >> (b - 2)) & 3;
        FIRST_SPACED + (b - 6) * 4 + q
    }
}

/// Slot size of every class.
pub static CLASS_SIZE: [usize; NUM_CLASSES] = {
    let mut t = [0usize; NUM_CLASSES];
    let mut c = 0;
    while c < NUM_CLASSES {
        t[c] = class_size_of(c);
        c += 1;
    }
    t
};

/// Whether every block of 16 bytes or more is served 16-aligned whatever alignment it asked for,
/// as C's `malloc` serves it: on musl. Rust's musl targets link LLVM's libunwind, which reads the
/// exception object (which std allocates with alignment 8) with 16-byte SSE moves: with 8-aligned
/// blocks every unwinding panic crashed. The table below gives it with no cost to the fast path:
/// on musl it maps every size from 17 B up to a class that is a multiple of 16 (17–24 B to the
/// 32 B class, 33–40 B to 48 B, 49–56 B to 64 B; every class above 64 B is a multiple of 16
/// already), so an 8-aligned request of any size takes the common path and still gets a 16-aligned
/// slot. The waste bound at or below 64 B is then 15 bytes, not 7. (Before, musl raised each such
/// request's alignment to 16, which sent nearly every small allocation past the common path:
/// issue 40.)
pub const SIXTEEN_FROM_16: bool = cfg!(target_env = "musl");

/// `SMALL_TABLE[(s + 7) / 8]` is the class of size `s ≤ 1024` (rounded up to 16 from 16 B on when
/// [`SIXTEEN_FROM_16`]).
static SMALL_TABLE: [u8; TABLE_MAX / 8 + 1] = class_table(SIXTEEN_FROM_16);

/// Per class, the smallest request size the table maps to it (sizes from it up to the class's
/// size are the class's), or `usize::MAX` for a class the table maps no size to: with
/// [`SIXTEEN_FROM_16`] the 24, 40 and 56 B classes, whose sizes go to the next class, which then
/// starts 16 bytes lower (17 B for 32 B).
static TABLE_LO: [usize; NUM_CLASSES] = {
    let t = class_table(SIXTEEN_FROM_16);
    let mut lo = [usize::MAX; NUM_CLASSES];
    // Downward, so that each class keeps its smallest entry.
    let mut i = t.len();
    while i > 0 {
        i -= 1;
        lo[t[i] as usize] = if i == 0 { 0 } else { 8 * i - 7 };
    }
    lo
};

/// The request sizes up to [`COMMON_MAX`] that [`class_of_common`] maps to class `c` (empty when
/// none): `lo..=hi`. Not `size_of(c - 1) + 1 ..= size_of(c)` where the table rounds sizes up
/// ([`SIXTEEN_FROM_16`]).
pub fn common_sizes(c: usize) -> core::ops::RangeInclusive<usize> {
    TABLE_LO[c]..=size_of(c).min(COMMON_MAX)
}

/// The class of each size up to [`TABLE_MAX`] in steps of 8: entry `i` is the class of sizes
/// `8i - 7 ..= 8i` (and of 0 for `i = 0`), each size from 16 B on rounded up to a multiple of 16
/// first when `sixteen` (then every block of 16 B or more is 16-aligned).
const fn class_table(sixteen: bool) -> [u8; TABLE_MAX / 8 + 1] {
    let mut t = [0u8; TABLE_MAX / 8 + 1];
    let mut i = 0;
    while i < t.len() {
        let s = i * 8;
        let s = if sixteen && s >= 16 {
            (s + 15) & !15
        } else {
            s
        };
        t[i] = class_of_size_computed(s) as u8;
        i += 1;
    }
    t
}

/// [`class_of`] for the common case alone (at most 1 KiB, aligned to at most 8), else `None`. A
/// caller that sends every other request down a separate path keeps its fast path free of
/// [`class_of`]'s other branches.
#[inline(always)]
pub fn class_of_common(size: usize, align: usize) -> Option<usize> {
    if align <= 8 && size <= TABLE_MAX {
        Some(SMALL_TABLE[(size + 7) >> 3] as usize)
    } else {
        None
    }
}

/// The class that serves `size` bytes aligned to `align`, or `None` when the request belongs to the
/// large-block path (too big, or aligned beyond what a class can give).
#[inline(always)]
pub fn class_of(size: usize, align: usize) -> Option<usize> {
    // The common case first, in as few instructions as we can: an alignment of at most 8 never
    // changes the class (every class is a multiple of 8), and the call site's alignment is nearly
    // always a constant, so this test folds away.
    if let Some(c) = class_of_common(size, align) {
        return Some(c);
    }
    // Round up to the alignment first. For align ≤ 8 this never changes the class (every class is a
    // multiple of 8); for larger alignments it picks a class that is a multiple of align (module
    // docs). No overflow: a Layout's size rounded up to its align is at most isize::MAX.
    let s = (size + align - 1) & !(align - 1);
    if s <= TABLE_MAX {
        Some(SMALL_TABLE[(s + 7) >> 3] as usize)
    } else if s <= MAX_SMALL {
        Some(class_of_size_computed(s))
    } else {
        None
    }
}

/// True when `size` bytes aligned to `align` are served from a class (the test `class_of` makes,
/// without finding the class: the free path reads the class from the chunk header instead).
#[inline(always)]
pub fn is_small(size: usize, align: usize) -> bool {
    // No rounding: `MAX_SMALL` is a multiple of every alignment up to itself, so a size up to it
    // rounded up to such an alignment stays within it, and a larger alignment is never a class's.
    // Two compares, no arithmetic: the free path's whole test (it was nine instructions with the
    // rounding, when the alignment is not a constant, as in `__rust_dealloc`).
    size <= MAX_SMALL && align <= MAX_SMALL
}

/// True for nearly every request [`is_small`] accepts, false for every other: those within
/// `align - 1` bytes of [`MAX_SMALL`] (of the 64 KiB class) are the small ones it refuses. One
/// addition and one compare (a `lea`, a `cmp`, a branch: one instruction fewer than
/// [`is_small`]'s two compares), for a free path that sends what it refuses to [`is_small`].
#[inline(always)]
pub fn is_small_common(size: usize, align: usize) -> bool {
    // No overflow: a Layout's size rounded up to its alignment is at most isize::MAX. Both
    // terms are at least 1, so a sum up to MAX_SMALL + 1 holds each within MAX_SMALL.
    size + align <= MAX_SMALL + 1
}

/// True when a block at address `addr` in a slot of class `c` may hold `size` bytes aligned to
/// `align` in place (the in-place rule of `realloc`, in `PoolAlloc` and the C library alike): the
/// size fits the slot, the address has the alignment, and either the size is of the slot's own
/// class or it uses at least half the slot. Below half, a shrink moves to a smaller class so that
/// `shrink_to_fit` gives memory back (mimalloc's realloc has the same floor, for every size; ours
/// keeps sizes of the slot's own class in place even below it, where a move would land in the same
/// class). The `hardened` size-mismatch check accepts exactly these sizes for a slot of class `c`,
/// since a block shrunk in place is later freed with its new, smaller layout.
#[inline]
pub fn stays(c: usize, size: usize, align: usize, addr: usize) -> bool {
    let slot = size_of(c);
    size <= slot
        && addr & (align - 1) == 0
        && (size >= slot / 2 || class_of(size, align) == Some(c))
}

/// Slot size of class `c`.
#[inline(always)]
pub fn size_of(c: usize) -> usize {
    debug_assert!(c < NUM_CLASSES);
    // Masked into a 64-entry copy of the table: no bounds check on the fast paths (a class is
    // always below NUM_CLASSES; a corrupt one would read 0, never out of bounds).
    SIZE_BY_CLASS[c & 63] as usize
}

/// [`CLASS_SIZE`] padded to 64 entries, as `u32`.
static SIZE_BY_CLASS: [u32; 64] = {
    let mut t = [0u32; 64];
    let mut c = 0;
    while c < NUM_CLASSES {
        t[c] = class_size_of(c) as u32;
        c += 1;
    }
    t
};

/// The class `malloc(size)` uses: C wants every block of 16 bytes or more 16-aligned
/// (`alignof(max_align_t)`, as glibc and jemalloc give), smaller ones 8-aligned. None above
/// [`MAX_SMALL`]. Sizes up to 1 KiB are one table lookup.
#[inline(always)]
pub fn class_of_malloc(size: usize) -> Option<usize> {
    if size <= TABLE_MAX {
        Some(MALLOC_TABLE[(size + 7) >> 3] as usize)
    } else if size <= MAX_SMALL {
        // Every class above 64 bytes is a multiple of 16 bytes, so its slots are 16-aligned.
        Some(class_of_size_computed(size))
    } else {
        None
    }
}

/// `MALLOC_TABLE[i]`: the class of sizes `8i - 7 ..= 8i` (and of 0 for i = 0) with C's alignment.
static MALLOC_TABLE: [u8; TABLE_MAX / 8 + 1] = class_table(true);

#[cfg(test)]
mod tests {
    use super::*;

    /// Each size up to COMMON_MAX is in the `common_sizes` of its table class and of no other
    /// (the heaps' direct array is filled by them: on musl, with `size_of(c - 1) + 1` as the
    /// start, 17-24 B were left to the 24 B class, which the table never gives them).
    #[test]
    fn common_sizes_are_the_sizes_the_table_maps_to_each_class() {
        for s in 0..=COMMON_MAX {
            let c = class_of_common(s, 1).unwrap();
            for o in 0..NUM_CLASSES {
                assert_eq!(common_sizes(o).contains(&s), o == c, "size {s}, class {o}");
            }
        }
        if SIXTEEN_FROM_16 {
            assert!(common_sizes(class_of_size_computed(24)).is_empty());
            assert_eq!(common_sizes(class_of_size_computed(32)), 17..=32);
        }
    }

    #[test]
    fn table_is_increasing_and_ends_at_max() {
        for c in 1..NUM_CLASSES {
            assert!(CLASS_SIZE[c] > CLASS_SIZE[c - 1]);
        }
        assert_eq!(CLASS_SIZE[0], 8);
        assert_eq!(CLASS_SIZE[NUM_CLASSES - 1], MAX_SMALL);
        assert_eq!(CLASS_SIZE[FIRST_SPACED], 80);
    }

    #[test]
    fn every_size_fits_its_class_and_the_waste_bound_holds() {
        // Miri is slow: check every size up to 4 KiB and a stride above.
        let step = if cfg!(miri) { 61 } else { 1 };
        let mut s = 1;
        while s <= MAX_SMALL {
            let c = class_of(s, 1).unwrap();
            let slot = size_of(c);
            assert!(slot >= s, "size {s} got class {c} of {slot} B");
            // On musl the smallest class that fits the size rounded up to 16 (from 16 B on), a
            // multiple of 16.
            let sixteen = SIXTEEN_FROM_16 && s >= 16;
            let r = if sixteen { s.next_multiple_of(16) } else { s };
            assert!(!sixteen || slot % 16 == 0, "size {s}: a slot of {slot} B");
            assert!(
                c == 0 || size_of(c - 1) < r,
                "size {s}: a smaller class fits"
            );
            assert_eq!(c, class_of_size_computed(r));
            if s > 64 {
                assert!((slot - s) * 4 < s, "size {s}: waste {} ≥ 25%", slot - s);
                assert!(
                    (slot - s) * 5 < slot,
                    "size {s}: waste {} ≥ 20% of slot",
                    slot - s
                );
            } else {
                // 15 bytes on musl (SIXTEEN_FROM_16's doc).
                assert!(slot - s < if SIXTEEN_FROM_16 { 16 } else { 8 });
            }
            s += if s < 4096 { 1 } else { step };
        }
        assert_eq!(class_of(MAX_SMALL + 1, 1), None);
    }

    #[test]
    fn malloc_classes_fit_and_are_aligned_as_c_wants() {
        for s in 0..=MAX_SMALL + 1 {
            let want = if s <= 8 { 8 } else { 16 };
            match class_of_malloc(s) {
                Some(c) => {
                    assert!(size_of(c) >= s.max(1), "size {s}");
                    assert_eq!(
                        size_of(c) % want,
                        0,
                        "size {s}: class {c} not {want}-aligned"
                    );
                    assert_eq!(Some(c), class_of(s.max(1), want), "size {s}");
                }
                None => assert!(s > MAX_SMALL),
            }
        }
    }

    #[test]
    fn aligned_requests_get_aligned_classes() {
        let step = if cfg!(miri) { 97 } else { 1 };
        let mut align = 1;
        while align <= 2 * MAX_SMALL {
            let mut s = 1;
            while s <= MAX_SMALL {
                assert_eq!(is_small(s, align), class_of(s, align).is_some());
                assert!(!is_small_common(s, align) || is_small(s, align));
                assert_eq!(is_small_common(s, align), s + align <= MAX_SMALL + 1);
                match class_of(s, align) {
                    Some(c) => {
                        let slot = size_of(c);
                        assert!(slot >= s);
                        // The slot's own alignment (largest power of two dividing it) covers align.
                        assert!(1usize << slot.trailing_zeros() >= align, "s={s} a={align}");
                    }
                    None => assert!(s.next_multiple_of(align) > MAX_SMALL),
                }
                s += step;
            }
            align *= 2;
        }
    }
}
