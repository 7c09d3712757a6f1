//! Ordinary std code under the allocator, across threads.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, mpsc};

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

trait Shape: Send {
    fn area(&self) -> f64;
}
struct Sq(f64);
struct Rect(f64, f64);
impl Shape for Sq {
    fn area(&self) -> f64 {
        self.0 * self.0
    }
}
impl Shape for Rect {
    fn area(&self) -> f64 {
        self.0 * self.1
    }
}

fn build(t: usize) -> (HashMap<String, Vec<u64>>, BTreeMap<u64, String>) {
    let mut h = HashMap::new();
    let mut b = BTreeMap::new();
    for i in 0..20_000u64 {
        let k = format!("key-{t}-{i}");
        h.insert(k.clone(), (0..i % 50).collect());
        b.insert(i * 7 + t as u64, k);
        if i % 5 == 0 {
            h.remove(&format!("key-{t}-{}", i / 2));
        }
    }
    (h, b)
}

#[test]
fn collections_built_on_one_thread_are_checked_and_dropped_on_another() {
    let (tx, rx) = mpsc::channel();
    let producers: Vec<_> = (0..4)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || tx.send((t, build(t))).unwrap())
        })
        .collect();
    drop(tx);
    let checker = std::thread::spawn(move || {
        let mut n = 0;
        for (t, (h, b)) in rx {
            let (h2, b2) = build(t);
            assert_eq!(h, h2);
            assert_eq!(b, b2);
            n += 1;
        }
        n
    });
    for p in producers {
        p.join().unwrap();
    }
    assert_eq!(checker.join().unwrap(), 4);
}

#[test]
fn strings_boxes_arcs_and_deques() {
    let shared = Arc::new(Mutex::new(VecDeque::<Box<dyn Shape>>::new()));
    let hs: Vec<_> = (0..4)
        .map(|t| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                for i in 0..10_000 {
                    let s: Box<dyn Shape> = if i % 2 == 0 {
                        Box::new(Sq(t as f64))
                    } else {
                        Box::new(Rect(1.0, i as f64))
                    };
                    let mut q = shared.lock().unwrap();
                    q.push_back(s);
                    if q.len() > 100 {
                        let old = q.pop_front().unwrap();
                        assert!(old.area() >= 0.0);
                    }
                }
                let mut s = String::new();
                for i in 0..5000 {
                    s += &format!("{i},");
                }
                s.split(',').filter(|x| !x.is_empty()).count()
            })
        })
        .collect();
    for h in hs {
        assert_eq!(h.join().unwrap(), 5000);
    }
    assert_eq!(shared.lock().unwrap().len(), 100);
}
