//! A model check of the remote-free protocol (`src/chunks/remote_list.rs`, included here as it is, with
//! its atomics bound to loom's): loom runs every interleaving of the threads below (every
//! order of their atomic operations the memory model allows, within its preemption bound), and
//! the slots' links are loom cells, so a link read before the write it needs happens-before is
//! a failure too. Checked:
//!
//! - pushes from two threads, one of them a batch of two slots, while the owner takes the list:
//!   every slot is taken exactly once, its link intact;
//! - the FULL mark against a concurrent push: the owner marks the list full only when it is empty,
//!   and then exactly the push that clears the mark reports it (the owner is told); when the mark
//!   fails the owner takes the slot itself; never is the chunk full with a slot waiting and nobody
//!   told;
//! - two pushers against a marked list: exactly one of them reports clearing FULL;
//! - messages (issue 45, step 3): two freers each write the indices of a run into the run's first
//!   slot and push it alone (counting the run's slots), while the owner takes and expands: every
//!   slot is taken exactly once, and the indices, written before the push, are read after the
//!   take (a read the release/acquire pair did not order fails, as for links).
//!
//! Abandonment and adoption happen under the chunk source's class lock (ordering by the lock),
//! and batches are built in a thread's own memory before their one push: both reduce to the
//! pushes checked here.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release --test loom_remote` (CI: `.ci/run`, in a
//! target folder of its own). Without `--cfg loom` this file is empty.
#![cfg(loom)]

/// What `remote_list.rs` names `crate::sync::atomic`: loom's atomics here.
mod sync {
    pub use loom::sync::atomic;
}

#[path = "../src/chunks/remote_list.rs"]
#[allow(dead_code)]
mod remote_list;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::AtomicUsize;
use remote_list::FULL;

/// Slots, 8-aligned like real ones (so bit 0 is free for FULL); `next` is the link (0: none).
#[repr(align(8))]
struct Slot {
    id: usize,
    next: UnsafeCell<usize>,
    /// A message's indices (`src/chunks/message.rs` writes them into the slot after its link).
    indices: UnsafeCell<Vec<usize>>,
}

struct Chunk {
    list: AtomicUsize,
    slots: Vec<Slot>,
}

// SAFETY: the slots' links are loom cells: loom checks every access to them for races.
unsafe impl Sync for Chunk {}
unsafe impl Send for Chunk {}

impl Chunk {
    fn new(n: usize) -> Arc<Chunk> {
        Arc::new(Chunk {
            list: AtomicUsize::new(0),
            slots: (0..n)
                .map(|id| Slot {
                    id,
                    next: UnsafeCell::new(0),
                    indices: UnsafeCell::new(Vec::new()),
                })
                .collect(),
        })
    }

    fn addr(&self, i: usize) -> usize {
        &self.slots[i] as *const Slot as usize
    }

    fn slot(addr: usize) -> &'static Slot {
        // SAFETY: every address on the list is one of the chunk's slots, alive for the model's run
        // (the chunk outlives every thread: the main thread holds it).
        unsafe { &*(addr as *const Slot) }
    }

    /// Pushes slots `ids` (linked in that order, the last one's link written by the push).
    fn push(&self, ids: &[usize]) -> bool {
        for w in ids.windows(2) {
            let next = self.addr(w[1]);
            // SAFETY: the slot is this thread's until the push below publishes it; loom's cell
            // checks that no other thread touches it meanwhile.
            self.slots[w[0]].next.with_mut(|p| unsafe { *p = next });
        }
        let tail = &self.slots[*ids.last().unwrap()];
        // SAFETY: the slots are this thread's until the push publishes them.
        unsafe {
            remote_list::push(&self.list, self.addr(ids[0]), ids.len(), |old| {
                tail.next.with_mut(|p| *p = old)
            })
        }
    }

    /// Pushes the run `ids` as a message: the indices of `ids[1..]` written into slot `ids[0]`,
    /// which alone is pushed (its link written by the push), counting the run's slots.
    fn push_message(&self, ids: &[usize]) -> bool {
        let m = &self.slots[ids[0]];
        // SAFETY: the run's first slot is this thread's until the push publishes it.
        m.indices.with_mut(|v| unsafe { *v = ids[1..].to_vec() });
        // SAFETY: as above.
        unsafe {
            remote_list::push(&self.list, self.addr(ids[0]), ids.len(), |old| {
                m.next.with_mut(|p| *p = old)
            })
        }
    }

    /// Takes the list and returns the ids on it, following the links, each message's indices
    /// after its own slot (a slot pushed by `push` carries none); the count the list word carried
    /// (64-bit targets) is the number of slots on it.
    fn take(&self) -> Vec<usize> {
        let mut out = Vec::new();
        let (mut a, counted) = remote_list::take(&self.list);
        let first = a;
        while a != 0 {
            let s = Self::slot(a);
            out.push(s.id);
            // SAFETY: the taken list is this thread's; its links and messages were written before
            // the push that published them (Release, seen by take's Acquire), as loom's cells
            // check.
            out.extend(s.indices.with(|v| unsafe { (*v).clone() }));
            // SAFETY: as above.
            a = s.next.with(|p| unsafe { *p });
        }
        if remote_list::COUNTED && first != 0 {
            assert_eq!(counted, out.len(), "the list word's count");
        }
        out
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

#[test]
fn pushes_and_a_concurrent_take_lose_and_duplicate_nothing() {
    model(|| {
        let c = Chunk::new(3);
        let (c1, c2) = (c.clone(), c.clone());
        let t1 = loom::thread::spawn(move || c1.push(&[0]));
        let t2 = loom::thread::spawn(move || c2.push(&[1, 2])); // a batch of two
        let mut got = c.take();
        t1.join().unwrap();
        t2.join().unwrap();
        got.extend(c.take());
        got.sort();
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(c.list.load(loom::sync::atomic::Ordering::Relaxed), 0);
    });
}

#[test]
fn the_full_mark_is_cleared_by_one_push_that_tells_the_owner() {
    model(|| {
        let c = Chunk::new(1);
        let c1 = c.clone();
        let pusher = loom::thread::spawn(move || c1.push(&[0]));
        // The owner: mark full if nothing waits, else take what waits.
        let marked = remote_list::try_mark_full(&c.list);
        let taken = if marked { Vec::new() } else { c.take() };
        let told = pusher.join().unwrap();
        if marked {
            // The push came after the mark: it cleared FULL and said so; the slot waits.
            assert!(told, "a push onto a full chunk must tell the owner");
            assert_eq!(c.take(), vec![0]);
        } else {
            // The slot was there first: the owner took it, nobody was told.
            assert!(!told);
            assert_eq!(taken, vec![0]);
        }
        assert_eq!(c.list.load(loom::sync::atomic::Ordering::Relaxed) & FULL, 0);
    });
}

#[test]
fn of_two_pushes_onto_a_full_chunk_exactly_one_tells() {
    model(|| {
        let c = Chunk::new(2);
        assert!(remote_list::try_mark_full(&c.list));
        let (c1, c2) = (c.clone(), c.clone());
        let t1 = loom::thread::spawn(move || c1.push(&[0]));
        let t2 = loom::thread::spawn(move || c2.push(&[1]));
        let told = [t1.join().unwrap(), t2.join().unwrap()];
        assert_eq!(told.iter().filter(|&&t| t).count(), 1, "{told:?}");
        let mut got = c.take();
        got.sort();
        assert_eq!(got, vec![0, 1]);
    });
}

#[test]
fn the_owner_clearing_full_itself_loses_no_push() {
    model(|| {
        let c = Chunk::new(1);
        assert!(remote_list::try_mark_full(&c.list));
        let c1 = c.clone();
        let pusher = loom::thread::spawn(move || c1.push(&[0]));
        // The owner frees one of its own slots of the full chunk: it takes the chunk off its full
        // list and clears the mark itself (heap/free.rs).
        remote_list::clear_full(&c.list);
        let told = pusher.join().unwrap();
        assert!(!remote_list::is_full(&c.list));
        // Told only if the push came before the owner's clear; the slot waits either way.
        let _ = told;
        assert_eq!(c.take(), vec![0]);
    });
}

#[test]
fn messages_pushed_while_the_owner_takes_are_expanded_whole() {
    model(|| {
        let c = Chunk::new(5);
        let (c1, c2) = (c.clone(), c.clone());
        let t1 = loom::thread::spawn(move || c1.push_message(&[0, 1, 2]));
        let t2 = loom::thread::spawn(move || c2.push_message(&[3, 4]));
        let mut got = c.take();
        t1.join().unwrap();
        t2.join().unwrap();
        got.extend(c.take());
        got.sort();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
    });
}
