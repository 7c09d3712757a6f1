//! large-buffers: a server's response buffers. Each of the threads builds buffers of 16 KiB to 4
//! MiB by appending 4 KiB pieces (the `Vec` grows by doubling, so its large blocks are reallocated
//! on the way), keeps the last 16 live, and hands one in three of those it retires to a writer
//! thread that drops them (a block freed on another thread). Above 64 KiB these are large blocks:
//! under `PoolAlloc` spans of its own where they are the default (x86-64 Linux). Reported like the
//! fragmentation workloads: time, peak RSS against the peak of live bytes, and RSS right after
//! everything is freed and one second later, with the threads still alive (a server's workers do
//! not exit; an exiting thread's arena is trimmed by glibc itself).

use super::{Extra, Params, Rng, after_free};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, mpsc};

/// Buffers each thread keeps live.
const WINDOW: usize = 16;
const PIECE: usize = 4096;

pub(super) fn large_buffers(p: Params) -> Extra {
    let live = AtomicUsize::new(0);
    let peak = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let per_thread = 150 * p.scale;
    let mut e = Extra::default();
    // Workers free everything, then wait alive until RSS was measured.
    let (freed, measured) = (Barrier::new(p.threads + 1), Barrier::new(p.threads + 1));
    std::thread::scope(|s| {
        let live = &live;
        let dropper = s.spawn(move || {
            for b in rx {
                live.fetch_sub(b.len(), Ordering::Relaxed);
                drop(b);
            }
        });
        for t in 0..p.threads {
            let tx = tx.clone();
            let (peak, freed, measured) = (&peak, &freed, &measured);
            s.spawn(move || {
                let mut r = Rng::new(21 + t as u64);
                let piece = [t as u8; PIECE];
                let mut window: std::collections::VecDeque<Vec<u8>> = Default::default();
                for i in 0..per_thread {
                    let target = r.range(16 << 10, 4 << 20);
                    let mut b = Vec::new();
                    while b.len() < target {
                        b.extend_from_slice(&piece[..PIECE.min(target - b.len())]);
                    }
                    let now = live.fetch_add(b.len(), Ordering::Relaxed) + b.len();
                    peak.fetch_max(now, Ordering::Relaxed);
                    window.push_back(b);
                    if window.len() > WINDOW {
                        let old = window.pop_front().unwrap();
                        assert_eq!(old.last(), Some(&(t as u8)), "buffer corrupted");
                        if i % 3 == 0 {
                            tx.send(old).unwrap();
                        } else {
                            live.fetch_sub(old.len(), Ordering::Relaxed);
                        }
                    }
                }
                for b in window {
                    live.fetch_sub(b.len(), Ordering::Relaxed);
                }
                drop(tx);
                freed.wait();
                measured.wait();
            });
        }
        drop(tx);
        freed.wait();
        dropper.join().unwrap();
        e.peak_live = peak.load(Ordering::Relaxed);
        after_free(&mut e);
        measured.wait();
    });
    e
}
