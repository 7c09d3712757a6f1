//! poolalloc as the C allocator (being written).
