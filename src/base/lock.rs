//! The lock used off the fast path: a spin lock that never allocates and yields the CPU while it
//! waits, so a holder that was preempted gets to run (pure spinning on 2 cores with more threads
//! than cores wastes whole time slices). With the `testing` feature it counts its acquisitions,
//! waits and yields (`base/contention`); without it, `lock` is the spin lock's own.
//!
//! **Hangs that explain themselves** (issue 50). In test and debug builds (the `testing` feature,
//! or `debug_assertions`) every lock has a name and records its holder: a number for the thread
//! and the place (file and line) where it took the lock. A waiter that has waited longer than
//! `POOLALLOC_LOCK_WAIT_MS` (default 60 s under `testing`, off otherwise; never for a `Heap`'s
//! lock, which a scope holds while the program's code runs) aborts with a message
//! naming the lock, its holder and its place, its own place, and every other thread waiting for a
//! lock at that moment with that lock's holder: a lock-order cycle reads off those lines, and a
//! holder that never comes back shows where it took the lock. In release builds without
//! `testing` none of it exists: the lock is the spin lock alone, its name unused.

use super::contention;
use spin::mutex::{SpinMutex, SpinMutexGuard};

/// The lock order, first to last: a thread that holds a lock takes only locks of its rank or a
/// later one, so no two threads wait for each other (issue 50). Test and debug builds check it
/// on every acquisition and abort naming both locks and places (`watch`); DESIGN.md's lock table
/// says what each guards. Locks of one rank are taken together only by the fork handler (every
/// heap's `lists`, every class lock), always in one order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
// Builds without `hardened`, `testing` or `profiling` make no lock of some ranks; release builds
// without `testing` name none.
#[allow(dead_code)]
pub enum Rank {
    /// A `Heap`'s lock (`thread/own_heap`): its pools' slow paths and large blocks run under it.
    Heap,
    /// The exited threads' heap (`thread/heap/alloc`'s `SHARED`).
    Shared,
    /// The `testing` feature's limit setting (`checks/hooks/limit`): `stats()` runs under it.
    LimitSetting,
    /// The heap registry (`thread/heap/registry`).
    Registry,
    /// A heap's `lists` (`thread/heap`): its chunk lists, read by `stats` and remote frees.
    Lists,
    /// A size class's empty and abandoned chunks (`memory/chunk_lists`).
    Class,
    /// The chunk regions and their units (`memory/source`).
    Regions,
    /// The waiting spans (`memory/span_cache`).
    SpanCache,
    /// The arenas' index of free runs (`memory/arena`).
    Arena,
    /// `hardened-full`'s quarantine of the C library's freed blocks (`checks/hardened`).
    Quarantine,
    /// `hardened`'s table of live large blocks (`checks/hardened`).
    LargeTable,
    /// The profiler's tables (`checks/profile/table`).
    Profiler,
}

#[allow(dead_code)] // As above.
impl Rank {
    /// How the hang and order messages name a lock of this rank.
    pub const fn name(self) -> &'static str {
        match self {
            Rank::Heap => "Heap",
            Rank::Shared => "shared heap",
            Rank::LimitSetting => "testing limit setting",
            Rank::Registry => "heap registry",
            Rank::Lists => "heap lists",
            Rank::Class => "class lists",
            Rank::Regions => "regions",
            Rank::SpanCache => "span cache",
            Rank::Arena => "arena",
            Rank::Quarantine => "hardened-full quarantine",
            Rank::LargeTable => "hardened large-block table",
            Rank::Profiler => "profiler table",
        }
    }
}

/// Spin lock whose waiters yield the core (`os::yield_now`) between attempts.
pub struct Lock<T> {
    inner: SpinMutex<T, YieldRelax>,
    #[cfg(any(feature = "testing", debug_assertions))]
    watch: watch::Watch,
}

/// The lock held: the value, through `Deref`; dropped, the lock is released.
pub struct Guard<'a, T> {
    inner: SpinMutexGuard<'a, T>,
    #[cfg(any(feature = "testing", debug_assertions))]
    watch: &'a watch::Watch,
}

impl<T> Lock<T> {
    /// An unlocked lock of `rank` in the lock order holding `value`.
    #[cfg_attr(
        not(any(feature = "testing", debug_assertions)),
        allow(unused_variables)
    )]
    pub const fn new(rank: Rank, value: T) -> Lock<T> {
        Lock {
            inner: SpinMutex::new(value),
            #[cfg(any(feature = "testing", debug_assertions))]
            watch: watch::Watch::new(rank),
        }
    }

    /// Takes the lock, yielding the core while another thread holds it.
    #[inline]
    #[cfg_attr(any(feature = "testing", debug_assertions), track_caller)]
    pub fn lock(&self) -> Guard<'_, T> {
        #[cfg(any(feature = "testing", debug_assertions))]
        {
            let site = core::panic::Location::caller();
            watch::in_order(&self.watch, site);
            let inner = match self.inner.try_lock() {
                Some(g) => {
                    contention::lock_taken(false);
                    g
                }
                None => {
                    contention::lock_taken(true);
                    watch::wait(&self.watch, site, || self.inner.try_lock())
                }
            };
            self.watch.taken(site);
            Guard {
                inner,
                watch: &self.watch,
            }
        }
        #[cfg(not(any(feature = "testing", debug_assertions)))]
        Guard {
            inner: self.inner.lock(),
        }
    }

    /// The value, without locking (the caller has exclusive access, or the lock is known held by
    /// this thread or forgotten).
    #[inline]
    pub fn as_mut_ptr(&self) -> *mut T {
        self.inner.as_mut_ptr()
    }

    /// The value, through exclusive access to the lock.
    #[inline]
    pub fn get_mut(&mut self) -> &mut T {
        self.inner.get_mut()
    }

    /// Releases the lock whoever holds it (the fork child's release of what the parent took).
    ///
    /// # Safety
    /// The holder's guard must never be used or dropped afterwards (it was forgotten).
    #[inline]
    pub unsafe fn force_unlock(&self) {
        #[cfg(any(feature = "testing", debug_assertions))]
        self.watch.released();
        // SAFETY: the caller's contract is the spin lock's.
        unsafe { self.inner.force_unlock() }
    }
}

impl<T> core::ops::Deref for Guard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T> core::ops::DerefMut for Guard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

#[cfg(any(feature = "testing", debug_assertions))]
impl<T> Drop for Guard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Before the spin lock's own guard (a field, dropped after this) releases it.
        self.watch.released();
    }
}

/// Relax strategy: give the core away.
pub struct YieldRelax;

impl spin::RelaxStrategy for YieldRelax {
    #[inline]
    fn relax() {
        contention::lock_yield();
        crate::os::yield_now();
    }
}

#[cfg(any(feature = "testing", debug_assertions))]
mod watch {
    //! The holder records and the bounded wait of test and debug builds.

    use super::{Rank, YieldRelax};
    use crate::base::settings;
    use crate::base::stack_text::StackText;
    use core::fmt::Write;
    use core::panic::Location;
    use core::ptr;
    use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering::Relaxed};
    use spin::RelaxStrategy;

    /// A lock's name and its holder: written by the holder, read by waiters only to tell a hang
    /// (relaxed: a message may show a holder one step stale, never a wrong lock).
    pub(super) struct Watch {
        rank: Rank,
        name: &'static str,
        /// The holder's thread number ([`me`]); 0: free.
        holder: AtomicUsize,
        /// Where the holder took it.
        site: AtomicPtr<Location<'static>>,
        /// When (`os::now_ms`).
        since: AtomicU32,
    }

    impl Watch {
        pub(super) const fn new(rank: Rank) -> Watch {
            Watch {
                rank,
                name: rank.name(),
                holder: AtomicUsize::new(0),
                site: AtomicPtr::new(ptr::null_mut()),
                since: AtomicU32::new(0),
            }
        }

        #[inline]
        pub(super) fn taken(&self, site: &'static Location<'static>) {
            self.holder.store(me(), Relaxed);
            self.site.store(ptr::from_ref(site).cast_mut(), Relaxed);
            self.since.store(crate::os::now_ms(), Relaxed);
            let r = self.rank as usize;
            with_held(|held| {
                held.count[r] = held.count[r].saturating_add(1);
                held.site[r] = ptr::from_ref(site);
            });
        }

        #[inline]
        pub(super) fn released(&self) {
            self.holder.store(0, Relaxed);
            let r = self.rank as usize;
            with_held(|held| held.count[r] = held.count[r].saturating_sub(1));
        }
    }

    const RANKS: usize = Rank::Profiler as usize + 1;

    /// The locks this thread holds: a count per rank, and where it took the last of each.
    #[derive(Clone, Copy)]
    struct Held {
        count: [u8; RANKS],
        site: [*const Location<'static>; RANKS],
    }

    // Not on Windows: windows-gnu has no native thread-locals, and `std` boxes each one at a
    // thread's first use, through the allocator (us). The order is the same code there; the
    // other targets check it.
    #[cfg(not(windows))]
    std::thread_local! {
        static HELD: core::cell::Cell<Held> = const {
            core::cell::Cell::new(Held { count: [0; RANKS], site: [ptr::null(); RANKS] })
        };
    }

    /// Runs `f` on this thread's record of the locks it holds (nothing on Windows).
    #[inline]
    fn with_held<R: Default>(f: impl FnOnce(&mut Held) -> R) -> R {
        #[cfg(not(windows))]
        return HELD.with(|h| {
            let mut held = h.get();
            let r = f(&mut held);
            h.set(held);
            r
        });
        #[cfg(windows)]
        {
            let _ = f;
            R::default()
        }
    }

    /// Aborts when this thread holds a lock later in the order than `lock` (see [`Rank`]).
    #[inline]
    pub(super) fn in_order(lock: &Watch, site: &'static Location<'static>) {
        let Some(held) = with_held(|h| Some(*h)) else {
            return;
        };
        let later = (lock.rank as usize + 1..RANKS)
            .rev()
            .find(|&r| held.count[r] != 0);
        if let Some(r) = later {
            out_of_order(lock, site, r, held.site[r]);
        }
    }

    #[cold]
    fn out_of_order(
        lock: &Watch,
        site: &Location<'_>,
        held: usize,
        held_site: *const Location<'static>,
    ) -> ! {
        let mut t = StackText::<4096>::new();
        let held_name = RANK_NAMES[held];
        let _ = write!(
            t,
            "poolalloc: lock order: thread {:#x} takes `{}` at {}:{} while it holds `{held_name}`, \
             later in the order (base/lock.rs: Rank)",
            me(),
            lock.name,
            site.file(),
            site.line()
        );
        if !held_site.is_null() {
            // SAFETY: only `taken` stores sites, `&'static Location`s.
            let s = unsafe { &*held_site };
            let _ = write!(t, ", taken at {}:{}", s.file(), s.line());
        }
        let _ = t.write_str("\n");
        crate::os::fatal_write_and_abort(t.as_bytes())
    }

    /// Each rank's name, by its number.
    const RANK_NAMES: [&str; RANKS] = [
        Rank::Heap.name(),
        Rank::Shared.name(),
        Rank::LimitSetting.name(),
        Rank::Registry.name(),
        Rank::Lists.name(),
        Rank::Class.name(),
        Rank::Regions.name(),
        Rank::SpanCache.name(),
        Rank::Arena.name(),
        Rank::Quarantine.name(),
        Rank::LargeTable.name(),
        Rank::Profiler.name(),
    ];

    /// This thread's number (`os::thread_id`: no thread-local of ours, which on windows-gnu
    /// would be boxed through the allocator at its first use).
    fn me() -> usize {
        crate::os::thread_id()
    }

    /// A thread waiting for a lock now, for the hang message's list of waiters.
    struct Waiter {
        thread: AtomicUsize,
        lock: AtomicPtr<Watch>,
        site: AtomicPtr<Location<'static>>,
    }

    const SLOTS: usize = 32;
    static WAITERS: [Waiter; SLOTS] = [const {
        Waiter {
            thread: AtomicUsize::new(0),
            lock: AtomicPtr::new(ptr::null_mut()),
            site: AtomicPtr::new(ptr::null_mut()),
        }
    }; SLOTS];

    /// Attempts between two looks at the clock.
    const SPINS_PER_LOOK: u32 = 64;

    /// Waits for `lock` (whose spin lock `try_lock` tries), yielding between attempts; past the
    /// bound (`POOLALLOC_LOCK_WAIT_MS`), aborts with the hang message.
    #[cold]
    pub(super) fn wait<G>(
        lock: &Watch,
        site: &'static Location<'static>,
        mut try_lock: impl FnMut() -> Option<G>,
    ) -> G {
        let me = me();
        // This thread holds it already (only it writes its own number there, and it clears it
        // before it releases): a lock taken again inside its own critical section waits for ever.
        if lock.holder.load(Relaxed) == me {
            taken_again(lock, site, me);
        }
        // A slot in the waiters' list, where one is free (the message is only less complete).
        let slot = WAITERS
            .iter()
            .find(|w| w.thread.compare_exchange(0, me, Relaxed, Relaxed).is_ok());
        if let Some(w) = slot {
            w.lock.store(ptr::from_ref(lock).cast_mut(), Relaxed);
            w.site.store(ptr::from_ref(site).cast_mut(), Relaxed);
        }
        let start = crate::os::now_ms();
        let mut spins = 0u32;
        let got = loop {
            if let Some(g) = try_lock() {
                break g;
            }
            YieldRelax::relax();
            spins = spins.wrapping_add(1);
            if spins % SPINS_PER_LOOK == 0 {
                let waited = crate::os::now_ms().wrapping_sub(start);
                // The setting is read only once a wait has lasted (no setting read on a lock
                // taken while the settings themselves are read).
                // A `Heap`'s lock is held for a whole scope, while the program's own code runs:
                // no bound on waiting for it (its holder is still recorded, its order checked).
                if waited >= 1000 && lock.rank != Rank::Heap {
                    let bound = settings::lock_wait_ms();
                    if bound != 0 && waited as usize >= bound {
                        hang(lock, site, me, waited, spins);
                    }
                }
            }
        };
        if let Some(w) = slot {
            w.lock.store(ptr::null_mut(), Relaxed);
            w.thread.store(0, Relaxed);
        }
        got
    }

    /// The holder part of a line: "held by thread 3 (taken at src/x.rs:10, 31000 ms ago)".
    fn holder(t: &mut StackText<4096>, lock: &Watch, now: u32) {
        let h = lock.holder.load(Relaxed);
        let site = lock.site.load(Relaxed);
        if h == 0 || site.is_null() {
            let _ = write!(t, "free now");
            return;
        }
        // SAFETY: only `taken` stores here, a `&'static Location`.
        let site = unsafe { &*site };
        let _ = write!(
            t,
            "held by thread {h:#x} (taken at {}:{}, {} ms ago)",
            site.file(),
            site.line(),
            now.wrapping_sub(lock.since.load(Relaxed))
        );
    }

    #[cold]
    fn taken_again(lock: &Watch, site: &Location<'_>, me: usize) -> ! {
        let mut t = StackText::<4096>::new();
        let _ = write!(
            t,
            "poolalloc: lock `{}` taken again by the thread that holds it: thread {me:#x} at {}:{}; it is ",
            lock.name,
            site.file(),
            site.line()
        );
        holder(&mut t, lock, crate::os::now_ms());
        let _ = t.write_str(" (a lock taken inside its own critical section waits for ever)\n");
        crate::os::fatal_write_and_abort(t.as_bytes())
    }

    #[cold]
    fn hang(lock: &Watch, site: &Location<'_>, me: usize, waited: u32, spins: u32) -> ! {
        let now = crate::os::now_ms();
        let mut t = StackText::<4096>::new();
        let _ = write!(
            t,
            "poolalloc: lock `{}` not released: thread {me:#x} waited {waited} ms for it at {}:{} \
             ({spins} attempts); it is ",
            lock.name,
            site.file(),
            site.line()
        );
        holder(&mut t, lock, now);
        let _ = write!(t, ". Threads waiting for a lock now:");
        for w in &WAITERS {
            let th = w.thread.load(Relaxed);
            let l = w.lock.load(Relaxed);
            let s = w.site.load(Relaxed);
            if th == 0 || l.is_null() || s.is_null() {
                continue;
            }
            // SAFETY: locks are statics or live as long as their waiters (a waiter's slot is
            // cleared before it stops waiting); sites are `&'static Location`s.
            let (l, s) = unsafe { (&*l, &*s) };
            let _ = write!(
                t,
                "\n  thread {th:#x} at {}:{} waits for `{}`, ",
                s.file(),
                s.line(),
                l.name
            );
            holder(&mut t, l, now);
        }
        let _ = t.write_str("\n(POOLALLOC_LOCK_WAIT_MS sets the bound; 0: none)\n");
        crate::os::fatal_write_and_abort(t.as_bytes())
    }
}

#[cfg(all(test, any(feature = "testing", debug_assertions)))]
mod tests {
    use super::*;
    use poolalloc_test_support::child;

    /// Runs `case` in a child of this binary (through the test `entry`) and expects it to abort
    /// with a line that contains each of `words`.
    fn aborts_saying(entry: &str, case: &str, words: &[&str]) {
        child::enter(|c| {
            match c {
                "hang" => {
                    static L: Lock<u32> = Lock::new(Rank::SpanCache, 0);
                    crate::base::settings::set_lock_wait_ms(1500);
                    let (tx, rx) = std::sync::mpsc::channel();
                    std::thread::spawn(move || {
                        core::mem::forget(L.lock());
                        tx.send(()).unwrap();
                        loop {
                            std::thread::park();
                        }
                    });
                    rx.recv().unwrap();
                    drop(L.lock());
                }
                "again" => {
                    static L: Lock<u32> = Lock::new(Rank::Arena, 0);
                    let _a = L.lock();
                    let _b = L.lock();
                }
                "order" => {
                    static LATE: Lock<u32> = Lock::new(Rank::Arena, 0);
                    static EARLY: Lock<u32> = Lock::new(Rank::Class, 0);
                    // In order, then released: fine.
                    drop((EARLY.lock(), LATE.lock()));
                    let _l = LATE.lock();
                    let _e = EARLY.lock();
                }
                _ => unreachable!(),
            }
            std::eprintln!("{c}: returned");
        });
        if cfg!(target_family = "wasm") {
            return; // no child processes
        }
        let line = child::expect(entry, case, child::Ending::Aborts, words[0])
            .unwrap_or_else(|e| panic!("{e}"));
        for w in words {
            assert!(line.contains(w), "{w:?} not in {line:?}");
        }
    }

    /// A lock whose holder never releases it: the waiter aborts once it waited the bound, naming
    /// the lock, its holder, where each took or waits for it (issue 50: every thread spun on a
    /// lock, and nothing said which).
    #[test]
    #[cfg_attr(miri, ignore = "runs a child process")]
    fn a_lock_never_released_aborts_naming_it_and_its_holder() {
        aborts_saying(
            "base::lock::tests::a_lock_never_released_aborts_naming_it_and_its_holder",
            "hang",
            &[
                "lock `span cache` not released: thread ",
                "waited 1",
                "it is held by thread ",
                "(taken at src/base/lock.rs:",
            ],
        );
    }

    /// A lock taken again by its holder aborts at once (issue 50's hang: a panic under the span
    /// cache's lock, whose hook allocated a large block, which waited for that lock).
    #[test]
    #[cfg_attr(miri, ignore = "runs a child process")]
    fn a_lock_taken_again_by_its_holder_aborts_at_once() {
        aborts_saying(
            "base::lock::tests::a_lock_taken_again_by_its_holder_aborts_at_once",
            "again",
            &[
                "lock `arena` taken again by the thread that holds it",
                "src/base/lock.rs:",
            ],
        );
    }

    /// A lock taken while a lock later in the order is held aborts, naming both.
    #[test]
    #[cfg_attr(miri, ignore = "runs a child process")]
    #[cfg_attr(
        windows,
        ignore = "no record of the locks a thread holds on Windows (lock.rs)"
    )]
    fn locks_taken_out_of_order_abort_naming_both() {
        aborts_saying(
            "base::lock::tests::locks_taken_out_of_order_abort_naming_both",
            "order",
            &[
                "lock order: thread ",
                "takes `class lists`",
                "while it holds `arena`",
            ],
        );
    }

    #[test]
    fn ranks_are_named_in_their_order() {
        let names = [
            Rank::Heap,
            Rank::Shared,
            Rank::LimitSetting,
            Rank::Registry,
            Rank::Lists,
            Rank::Class,
            Rank::Regions,
            Rank::SpanCache,
            Rank::Arena,
            Rank::Quarantine,
            Rank::LargeTable,
            Rank::Profiler,
        ];
        assert!(names.windows(2).all(|w| w[0] < w[1]));
        for (i, r) in names.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
    }
}
