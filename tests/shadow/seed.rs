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

/// Replays every input saved for the fuzz target `target` (`fuzz/regressions/<target>/`) through
/// `run`, and returns how many there were. Panics when the folder is missing or empty: every
/// target keeps at least one input there, so a renamed or lost folder fails instead of replaying
/// nothing.
#[allow(dead_code)] // not every test binary that includes this file replays
pub fn replay(target: &str, mut run: impl FnMut(&[u8])) -> usize {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    let mut n = 0;
    for e in entries {
        let path = e.unwrap().path();
        let input =
            std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        run(&input);
        n += 1;
    }
    assert!(n > 0, "{} holds no input to replay", dir.display());
    n
}
