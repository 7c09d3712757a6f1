//! The benchmarks' random number generator: xorshift64, seeded, the same sequence on every
//! machine (workload shapes and generated inputs depend on nothing else).

/// A xorshift64 generator.
pub struct Rng(u64);

impl Rng {
    /// A generator whose sequence depends only on `seed` (any value, zero included).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next 64 random bits. Not `Iterator::next`: the sequence never ends, and the benchmarks
    /// call it by this name.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
}
