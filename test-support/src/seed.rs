//! Inputs for the shadow models: deterministic pseudo-random ones, and the regression inputs the
//! fuzz targets saved (fuzz/regressions/<target>/), replayed.

use std::path::{Path, PathBuf};

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

/// The folder of the inputs saved for the fuzz target `target`: fuzz/regressions/<target>/ of
/// the repository (this crate's parent folder; a path without `..`, which the wasm32 tests'
/// runner, giving the instance the repository's folder only, resolves as any other).
pub fn regressions(target: &str) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    repo.join("fuzz/regressions").join(target)
}

/// Replays every input in `dir` through `run`, and returns how many there were. Panics when the
/// folder is missing or empty: every fuzz target keeps at least one input in its folder, so a
/// renamed or lost folder fails instead of replaying nothing.
pub fn replay(dir: &Path, mut run: impl FnMut(&[u8])) -> usize {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_deterministic_and_differ_by_seed() {
        assert_eq!(input(7, 64), input(7, 64));
        assert_ne!(input(7, 64), input(8, 64));
    }

    #[test]
    fn every_fuzz_target_has_regressions_to_replay() {
        for target in ["collections", "global_alloc", "pool", "region", "threaded"] {
            assert!(replay(&regressions(target), |_| {}) > 0);
        }
    }

    #[test]
    #[should_panic(expected = "cannot read")]
    fn a_missing_folder_fails() {
        replay(&regressions("no-such-target"), |_| {});
    }

    #[test]
    #[should_panic(expected = "holds no input")]
    fn an_empty_folder_fails() {
        let dir = std::env::temp_dir().join(format!("poolalloc-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let _cleanup = RemoveOnDrop(dir.clone());
        replay(&dir, |_| {});
    }

    struct RemoveOnDrop(PathBuf);
    impl Drop for RemoveOnDrop {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }
}
