//! Typed pools sit on the allocator's own size-class pools, whatever the global allocator is (this
//! test binary keeps System): their slot groups show up in `stats()` and go back when the pool drops.
//! One test in this binary, so no other test allocates from the same class meanwhile.

use poolalloc::{GROUP_SLOTS, Pool};

#[test]
fn pool_groups_come_from_the_size_class_pools() {
    // A slot of Pool<u64> is the value, its generation and its free-list link: 16 bytes, so a group
    // of 64 slots is one 1024-byte block.
    let group_bytes = 16 * GROUP_SLOTS;
    let class = poolalloc::class_sizes()
        .iter()
        .position(|&s| s == group_bytes)
        .expect("a 1024-byte class");
    let live = || poolalloc::stats().classes()[class].live_slots;
    let before = live();
    let mut pool = Pool::new();
    let handles: Vec<_> = (0..1000u64).map(|i| pool.insert(i)).collect();
    assert_eq!(live() - before, 1000usize.div_ceil(GROUP_SLOTS));
    assert_eq!(pool.get(handles[999]), Some(&999));
    drop(pool);
    assert_eq!(live(), before);
}
