//! The process's RSS for the tests that check memory goes back to the OS (`tests/stats.rs`,
//! `tests/large_blocks.rs`).

/// The resident set, as `poolalloc::stats().rss_bytes` reads it from the OS (passed in: this crate
/// does not link poolalloc): `rss::bytes(poolalloc::stats().rss_bytes)`.
pub fn bytes(rss_bytes: Option<usize>) -> usize {
    rss_bytes.expect("RSS is reported on Linux, macOS, FreeBSD and Windows")
}

/// Why this process's RSS says nothing of the allocator, if it does not: set by .ci/targets under
/// qemu-user, where /proc/self/statm is the emulator's own and counts its heap and translated code,
/// which grow while the test runs (the RSS assertions are then skipped; the allocator's own
/// accounting is still checked).
pub fn not_the_programs() -> Option<String> {
    std::env::var("POOLALLOC_TEST_RSS_NOT_THE_PROGRAMS").ok()
}
