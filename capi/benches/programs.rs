//! Real programs under each allocator (placeholder; the benchmark is being written).
fn main() {}
