//! Deterministic pseudo-random inputs for the shadow-model interpreters.

/// `len` bytes from a xorshift generator seeded with `seed`.
pub fn input(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
