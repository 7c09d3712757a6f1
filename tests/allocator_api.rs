//! PoolAlloc as an allocator-api2 `Allocator`: collections on stable Rust, with grow and shrink
//! keeping the block inside its class.

use allocator_api2::alloc::{Allocator, Layout};
use allocator_api2::vec::Vec;
use poolalloc::PoolAlloc;

#[test]
fn vec_and_hashmap_in_poolalloc() {
    let mut v = Vec::new_in(PoolAlloc::new());
    for i in 0..100_000u32 {
        v.push(i);
    }
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
    let mut m = hashbrown::HashMap::new_in(PoolAlloc::new());
    for i in 0..10_000u32 {
        m.insert(i, i * 2);
    }
    assert_eq!(m.get(&777), Some(&1554));
}

#[test]
fn grow_and_shrink_stay_in_place_within_a_class() {
    let a = PoolAlloc::new();
    let l100 = Layout::from_size_align(100, 8).unwrap();
    let l110 = Layout::from_size_align(110, 8).unwrap();
    let p = a.allocate(l100).unwrap();
    assert!(p.len() >= 100); // the whole slot is usable
    // SAFETY: p was allocated with l100; 110 B is in the same 112 B class.
    let q = unsafe { a.grow(p.cast(), l100, l110).unwrap() };
    assert_eq!(p.cast::<u8>(), q.cast::<u8>());
    // SAFETY: q is live with l110.
    let r = unsafe { a.shrink(q.cast(), l110, l100).unwrap() };
    assert_eq!(q.cast::<u8>(), r.cast::<u8>());
    // SAFETY: r is live with l100.
    unsafe { a.deallocate(r.cast(), l100) };
    // Zero-sized requests get a dangling, aligned pointer.
    let z = a.allocate(Layout::from_size_align(0, 64).unwrap()).unwrap();
    assert_eq!(z.cast::<u8>().as_ptr() as usize % 64, 0);
}
