//! How a free slot is written: its link word, and (with `hardened`) its free mark.
//!
//! Without the `hardened` feature every function here is the identity or a no-op, so the data path
//! pays nothing. With it:
//! - links are stored as `rotl(p ^ k1, k0) + k0` with per-process keys, so an overwritten link does
//!   not point where an attacker chose, and a corrupted one is caught when it is decoded;
//! - a free slot of 16 bytes or more carries a keyed tag of its own address in its second word and,
//!   with `hardened-full`, zeros in the rest of it (the whole slot up to 4 KiB; of a larger one its
//!   first 4 KiB and last 1 KiB) (`mark_free`); `hardened` checks the tag on free (double free) and
//!   both on hand-out (write after free). On 32-bit targets an 8-byte
//!   free slot, whose link takes half of it, carries a 32-bit tag in the other half.
//!
//! This module knows nothing of chunks, so the chunk module (below the checks) can write free slots.

pub use imp::*;

#[cfg(feature = "hardened")]
mod imp {
    use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// Free slots are marked, links encoded.
    pub const HARDENED: bool = true;

    /// The pattern freed slots carry: zero, so a freed block reads as zeros (a dangling pointer
    /// reads no stale data) and a block handed out again is zeroed where it was checked.
    pub const POISON: u64 = 0;
    /// Whether freed slots are poisoned (and checked when handed out): `hardened-full` only.
    pub const POISONS: bool = cfg!(feature = "hardened-full");
    /// Bytes of a freed slot that carry the free mark in the fixed-size fast path: its first
    /// cache line's worth. Past them, [`REST_WHOLE`] and [`REST_TAIL`] say what is poisoned.
    pub const POISON_BYTES: usize = 64;
    /// Slots up to this size are poisoned and checked whole (`hardened-full`).
    pub const REST_WHOLE: usize = 4096;
    /// Of a larger slot, its first [`REST_WHOLE`] bytes and its last `REST_TAIL` are (a 64 KiB
    /// slot: 5 KiB of 64, so a hand-out reads at most 5 KiB).
    pub const REST_TAIL: usize = 1024;
    // `poison_rest` fills bytes: the poison must be one byte repeated.
    const _: () = assert!(POISON == (POISON as u8 as u64) * 0x0101_0101_0101_0101);
    /// Poisoned words of a slot of at least [`POISON_BYTES`]: all but the link and the tag.
    pub const POISON_WORDS: usize = POISON_BYTES / 8 - 2;

    /// The per-process keys: `k0`, `k1` encode links, `k2` keys the tags. One static, so a path
    /// that uses several finds them through one address (each static from another crate costs a
    /// load of its address from the GOT in a position-independent executable).
    #[repr(C, align(64))]
    struct Keys {
        k0: AtomicUsize,
        k1: AtomicUsize,
        k2: TagKey,
    }

    static KEYS: Keys = Keys {
        k0: AtomicUsize::new(0),
        k1: AtomicUsize::new(0),
        k2: TagKey::new(),
    };

    /// The tags' 64-bit key: one atomic where the target has 64-bit atomics; else (some 32-bit
    /// targets) two 32-bit halves. It is written once, by [`init`], before the first slot is
    /// tagged and the first span canary written, so no reader sees it half written.
    #[cfg(target_has_atomic = "64")]
    struct TagKey(core::sync::atomic::AtomicU64);
    #[cfg(target_has_atomic = "64")]
    impl TagKey {
        const fn new() -> Self {
            TagKey(core::sync::atomic::AtomicU64::new(0))
        }
        #[inline(always)]
        fn get(&self) -> u64 {
            self.0.load(Relaxed)
        }
        fn set(&self, k: u64) {
            self.0.store(k, Relaxed)
        }
    }
    #[cfg(not(target_has_atomic = "64"))]
    struct TagKey([core::sync::atomic::AtomicU32; 2]);
    #[cfg(not(target_has_atomic = "64"))]
    impl TagKey {
        const fn new() -> Self {
            TagKey([const { core::sync::atomic::AtomicU32::new(0) }; 2])
        }
        #[inline(always)]
        fn get(&self) -> u64 {
            u64::from(self.0[0].load(Relaxed)) | u64::from(self.0[1].load(Relaxed)) << 32
        }
        fn set(&self, k: u64) {
            self.0[0].store(k as u32, Relaxed);
            self.0[1].store((k >> 32) as u32, Relaxed);
        }
    }

    /// Rotations by `k0` take its low bits: 0 to 63 (0 to 31 on 32-bit targets).
    const ROTATE_MASK: usize = usize::BITS as usize - 1;

    /// True for an address that no stored link decodes to, and that is not null: at or above
    /// `2^ADDRESS_BITS` on 64-bit targets; on 32-bit ones, where every address may be user space,
    /// one that is not 8-aligned (every slot is).
    #[cfg(target_pointer_width = "64")]
    pub fn never_a_link(a: usize) -> bool {
        a >> crate::os::ADDRESS_BITS != 0
    }
    #[cfg(not(target_pointer_width = "64"))]
    pub fn never_a_link(a: usize) -> bool {
        a & 7 != 0
    }
    /// A bit that makes any address [`never_a_link`] when it is flipped in one that is not.
    #[cfg(target_pointer_width = "64")]
    const NOT_A_LINK_BIT: usize = 1 << 63;
    #[cfg(not(target_pointer_width = "64"))]
    const NOT_A_LINK_BIT: usize = 1;

    /// Draws the keys once, before the first chunk exists (so before any link is stored).
    pub fn init() {
        static ONCE: spin::Once<()> = spin::Once::new();
        ONCE.call_once(|| {
            let mut k = crate::os::random_seed();
            // A zeroed word must decode to an address no link holds: 8-byte blocks are zeroed when
            // handed out, and must then not look free.
            let k0 = k[0] | 1;
            if !never_a_link(
                0usize
                    .wrapping_sub(k0)
                    .rotate_right((k0 & ROTATE_MASK) as u32)
                    ^ k[1],
            ) {
                k[1] ^= NOT_A_LINK_BIT;
            }
            KEYS.k0.store(k0, Relaxed);
            KEYS.k1.store(k[1], Relaxed);
            // 64 bits of key: on 32-bit targets a word of a second draw fills the high half.
            let k2 = if cfg!(target_pointer_width = "64") {
                k[2] as u64
            } else {
                k[2] as u64 | (crate::os::random_seed()[0] as u64) << 32
            };
            // Never zero: a zeroed slot must not carry a free mark.
            KEYS.k2.set(k2 | 1 << 63);
        });
    }

    #[inline(always)]
    pub fn encode<T>(p: *mut T) -> *mut T {
        let (k0, k1) = (KEYS.k0.load(Relaxed), KEYS.k1.load(Relaxed));
        p.map_addr(|a| {
            (a ^ k1)
                .rotate_left((k0 & ROTATE_MASK) as u32)
                .wrapping_add(k0)
        })
    }

    #[inline(always)]
    pub fn decode<T>(e: *mut T) -> *mut T {
        let (k0, k1) = (KEYS.k0.load(Relaxed), KEYS.k1.load(Relaxed));
        e.map_addr(|a| a.wrapping_sub(k0).rotate_right((k0 & ROTATE_MASK) as u32) ^ k1)
    }

    /// The keyed tag a free slot at `p` carries in its second word.
    #[inline(always)]
    pub fn tag(p: *mut u8) -> u64 {
        (p as u64).rotate_left(23) ^ KEYS.k2.get()
    }

    /// Whether a free 8-byte slot carries a tag: on 32-bit targets its link takes 4 of its 8 bytes
    /// and [`tag8`] fills the other 4; on 64-bit ones the link fills the slot.
    pub const TAG8: bool = cfg!(target_pointer_width = "32");

    /// The 32-bit tag a free 8-byte slot at `p` carries in its last 4 bytes where [`TAG8`]: [`tag`]
    /// folded to 32 bits (its low half alone would depend on only 9 bits of a 32-bit address).
    #[inline(always)]
    pub fn tag8(p: *mut u8) -> u32 {
        let t = tag(p);
        (t ^ (t >> 32)) as u32
    }

    /// Marks a free slot of `size` bytes: its tag in word 1 and the poison pattern in words 2.. of
    /// its first 64 bytes (word 0 is the link). 8-byte slots have only the link, and on 32-bit
    /// targets ([`TAG8`]) a 32-bit tag after it.
    ///
    /// # Safety
    /// `s` must be an 8-aligned free slot of `size` bytes that nobody else uses.
    #[inline(always)]
    pub unsafe fn mark_free(s: *mut u8, size: usize) {
        if size >= 16 {
            // SAFETY: forwarded.
            unsafe { mark_free_tagged(s, size, tag(s)) }
        } else if TAG8 {
            // SAFETY: an 8-byte slot whose link is one 4-byte word: bytes 4..8 are the slot's
            // (caller), 4-aligned.
            unsafe { s.add(4).cast::<u32>().write(tag8(s)) }
        }
    }

    /// [`mark_free`] of a slot of at least 16 bytes whose tag the caller has computed.
    ///
    /// # Safety
    /// As for [`mark_free`], and `size >= 16`.
    #[inline(always)]
    pub unsafe fn mark_free_tagged(s: *mut u8, size: usize, tag: u64) {
        let w = s.cast::<u64>();
        // SAFETY: words 1 .. min(size, 64)/8 lie inside the slot (caller); slots are 8-aligned.
        unsafe {
            w.add(1).write(tag);
            if !POISONS {
                return;
            }
            if size >= POISON_BYTES {
                // The common case as one fixed-size store (vector moves, no loop).
                w.add(2)
                    .cast::<[u64; POISON_WORDS]>()
                    .write([POISON; POISON_WORDS]);
                if size > POISON_BYTES {
                    poison_rest(s, size);
                }
            } else if size >= 24 {
                // Five word stores, no loop and no branch (a loop here was vectorized into ~40
                // instructions of masked stores for every free of a 24–56-byte slot).
                for i in words(size) {
                    w.add(i).write(POISON);
                }
            }
        }
    }

    /// Whether slot `s` of `size` ≥ 16 bytes carries the free tag in its second word (its free
    /// marked it, and nothing wrote that word since).
    ///
    /// # Safety
    /// `s` must be an 8-aligned slot of `size` bytes that the caller may read.
    #[inline(always)]
    pub unsafe fn looks_free(s: *mut u8, size: usize) -> bool {
        // SAFETY: word 1 lies inside the slot (caller, size >= 16).
        size >= 16 && unsafe { s.cast::<u64>().add(1).read() } == tag(s)
    }

    /// True when a slot of `size` ≥ 16 bytes still carries the poison of [`mark_free_tagged`] in
    /// words 2 .. min(size, 64)/8 (its tag is checked by the caller).
    ///
    /// # Safety
    /// `s` must be an 8-aligned slot of `size` bytes that the caller may read.
    #[inline(always)]
    pub unsafe fn poison_intact(s: *mut u8, size: usize) -> bool {
        let w = s.cast::<u64>();
        if !POISONS {
            return true;
        }
        // SAFETY: as in mark_free_tagged, reads only.
        unsafe {
            if size >= POISON_BYTES {
                // One fixed-size read folded with xor/or (a slice compare would call memcmp).
                let words = w.add(2).cast::<[u64; POISON_WORDS]>().read();
                words.iter().fold(0, |acc, &x| acc | (x ^ POISON)) == 0
                    && (size <= POISON_BYTES || rest_changed_at(s, size).is_none())
            } else if size >= 24 {
                words(size)
                    .iter()
                    .fold(0, |acc, &i| acc | (w.add(i).read() ^ POISON))
                    == 0
            } else {
                true
            }
        }
    }

    /// The byte ranges past the first [`POISON_BYTES`] of a slot of `size` > 64 bytes that carry
    /// the poison: all the rest up to [`REST_WHOLE`], and the last [`REST_TAIL`] bytes past it.
    #[inline(always)]
    fn rest_ranges(size: usize) -> [core::ops::Range<usize>; 2] {
        let head = POISON_BYTES..size.min(REST_WHOLE);
        let tail = if size > REST_WHOLE {
            (size - REST_TAIL).max(REST_WHOLE)..size
        } else {
            size..size
        };
        [head, tail]
    }

    /// Poisons the bytes of [`rest_ranges`] of slot `s` (`hardened-full`).
    ///
    /// # Safety
    /// `s` is an 8-aligned slot of `size` > 64 bytes (a multiple of 8) that the caller owns.
    #[inline(never)]
    unsafe fn poison_rest(s: *mut u8, size: usize) {
        for r in rest_ranges(size) {
            // SAFETY: each range lies inside the slot (caller); POISON is a repeated byte (zero).
            unsafe { core::ptr::write_bytes(s.add(r.start), POISON as u8, r.len()) };
        }
    }

    /// The offset of the first word of [`rest_ranges`] of slot `s` that no longer holds the
    /// poison; None when all do.
    ///
    /// # Safety
    /// `s` is an 8-aligned slot of `size` > 64 bytes (a multiple of 8) that the caller may read.
    #[inline(never)]
    pub unsafe fn rest_changed_at(s: *mut u8, size: usize) -> Option<usize> {
        for r in rest_ranges(size) {
            // SAFETY: the range lies inside the slot (caller), 8-aligned at both ends (slot sizes,
            // REST_WHOLE and REST_TAIL are multiples of 8).
            let words =
                unsafe { core::slice::from_raw_parts(s.add(r.start).cast::<u64>(), r.len() / 8) };
            // Folded first (vectorized), searched only on failure.
            if words.iter().fold(0, |acc, &x| acc | (x ^ POISON)) != 0 {
                let i = words.iter().position(|&x| x != POISON).unwrap_or(0);
                return Some(r.start + i * 8);
            }
        }
        None
    }

    /// For a slot of 24–56 bytes (m = size/8 words, 3 ≤ m ≤ 7): five word indices that are
    /// words 2 .. m exactly, the last one repeated where m < 7. Word-sized accesses on both
    /// sides, so a hand-out right after the free can take each word from the store that wrote it
    /// (a load spanning two overlapping stores cannot be forwarded).
    #[inline(always)]
    fn words(size: usize) -> [usize; 5] {
        let last = size / 8 - 1;
        debug_assert!((2..7).contains(&last));
        [2, 3.min(last), 4.min(last), 5.min(last), 6.min(last)]
    }
}

#[cfg(not(feature = "hardened"))]
mod imp {
    /// Free slots are not marked, links are raw.
    pub const HARDENED: bool = false;

    #[inline(always)]
    pub fn init() {}

    #[inline(always)]
    pub fn encode<T>(p: *mut T) -> *mut T {
        p
    }

    #[inline(always)]
    pub fn decode<T>(e: *mut T) -> *mut T {
        e
    }

    /// # Safety
    /// None needed: does nothing (the twin of the hardened version, which writes the slot).
    #[inline(always)]
    pub unsafe fn mark_free(_s: *mut u8, _size: usize) {}

    /// Free slots carry no tag: every slot looks free.
    ///
    /// # Safety
    /// None (nothing is read); `unsafe` as the hardened version.
    #[inline(always)]
    pub unsafe fn looks_free(_s: *mut u8, _size: usize) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_round_trip() {
        init();
        // The two long ones as they are on 64-bit targets, their low halves on 32-bit ones.
        let long = [0x7fff_0000_1238_u64 as usize, 0x5555_5555_5550_u64 as usize];
        for a in [0usize, 8, long[0], long[1], usize::MAX & !7] {
            let p = core::ptr::without_provenance_mut::<u8>(a);
            assert_eq!(decode(encode(p)), p);
        }
        // Hardened: a zeroed word never decodes to null or to an address a link could hold:
        // above the user address space on 64-bit targets, not 8-aligned on 32-bit ones.
        #[cfg(feature = "hardened")]
        {
            let z = decode(core::ptr::null_mut::<u8>()) as usize;
            assert!(never_a_link(z), "{z:#x}");
            if cfg!(target_pointer_width = "64") {
                assert!(z as u64 >> crate::os::ADDRESS_BITS != 0);
            } else {
                assert!(z % 8 != 0);
            }
        }
    }

    /// Every slot size from 16 to 80 bytes: the free mark covers words 2 .. min(size, 64)/8
    /// exactly (no word of the next slot is written), is seen intact, and a change to any one of
    /// its bytes is seen.
    #[cfg(feature = "hardened")]
    #[test]
    fn free_mark_covers_its_words_exactly() {
        init();
        for size in (16..=80).step_by(8) {
            let mut buf = [0u64; 12];
            let s = buf.as_mut_ptr().cast::<u8>();
            // SAFETY: buf holds 96 bytes, 8-aligned, of which the slot takes `size`.
            unsafe { mark_free(s, size) };
            // Without `hardened-full` only the tag is written, and any bytes pass.
            let end = if POISONS {
                size.min(POISON_BYTES) / 8
            } else {
                0
            };
            for (i, &w) in buf.iter().enumerate() {
                let want = match i {
                    1 => tag(s),
                    i if (2..end).contains(&i) => POISON,
                    _ => 0,
                };
                assert_eq!(w, want, "size {size}, word {i}");
            }
            // SAFETY: as above.
            assert!(unsafe { poison_intact(s, size) }, "size {size}");
            for byte in 16..end * 8 {
                let mut copy = buf;
                let c = copy.as_mut_ptr().cast::<u8>();
                // SAFETY: byte < 64 lies inside copy.
                unsafe { *c.add(byte) ^= 0x40 };
                // SAFETY: as above.
                assert!(
                    !unsafe { poison_intact(c, size) },
                    "size {size}, byte {byte}"
                );
            }
        }
    }
}
