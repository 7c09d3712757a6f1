//! BlockingPool under several threads: resources are never shared, waiters are served, and a
//! shutdown during waits wakes everyone with an error.

use poolalloc::{AcquireError, BlockingPool};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

#[test]
fn threads_share_a_few_resources_without_sharing_any_one() {
    let pool = Arc::new(BlockingPool::new((0..3).map(|i| (i, AtomicUsize::new(0)))));
    let hs: Vec<_> = (0..8)
        .map(|_| {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || {
                for _ in 0..300 {
                    let r = pool.acquire().unwrap();
                    // Nobody else holds this resource: the in-use counter goes 0 -> 1 -> 0.
                    assert_eq!(r.1.fetch_add(1, Ordering::SeqCst), 0);
                    std::hint::spin_loop();
                    assert_eq!(r.1.fetch_sub(1, Ordering::SeqCst), 1);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(pool.available(), 3);
}

#[test]
fn shutdown_wakes_every_waiter() {
    let pool = Arc::new(BlockingPool::new([()]));
    let held = pool.try_acquire().unwrap();
    let waiting = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..4)
        .map(|i| {
            let pool = Arc::clone(&pool);
            let waiting = Arc::clone(&waiting);
            std::thread::spawn(move || {
                waiting.fetch_add(1, Ordering::SeqCst);
                if i % 2 == 0 {
                    pool.acquire()
                        .map(|_| ())
                        .map_err(|_| AcquireError::Shutdown)
                } else {
                    pool.acquire_timeout(Duration::from_secs(30)).map(|_| ())
                }
            })
        })
        .collect();
    while waiting.load(Ordering::SeqCst) < 4 {
        std::thread::yield_now();
    }
    std::thread::sleep(Duration::from_millis(50));
    pool.shutdown();
    for h in hs {
        assert_eq!(h.join().unwrap(), Err(AcquireError::Shutdown));
    }
    assert!(pool.acquire().is_err());
    drop(held);
    assert_eq!(pool.available(), 1);
}

#[test]
fn waiters_are_served_in_arrival_order() {
    let pool = Arc::new(BlockingPool::new([0u32]));
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = pool.acquire().unwrap();
    let mut hs = Vec::new();
    for i in 0..4 {
        let pool = Arc::clone(&pool);
        let order = Arc::clone(&order);
        hs.push(std::thread::spawn(move || {
            let _r = pool.acquire().unwrap();
            order.lock().unwrap().push(i);
        }));
        // Let thread i queue before thread i + 1 arrives.
        std::thread::sleep(Duration::from_millis(30));
    }
    drop(held);
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
}

#[test]
fn bounds() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<BlockingPool<String>>();
    send_sync::<poolalloc::Pool<String>>();
}
