//! The lock used off the fast path: a spin lock that never allocates and yields the CPU while it
//! waits, so a holder that was preempted gets to run (pure spinning on 2 cores with more threads
//! than cores wastes whole time slices). With the `testing` feature it counts its acquisitions,
//! waits and yields (`base/contention`); without it, `lock` is the spin lock's own.

use super::contention;
use spin::mutex::{SpinMutex, SpinMutexGuard};

/// Spin lock whose waiters yield the core (`os::yield_now`) between attempts.
pub struct Lock<T>(SpinMutex<T, YieldRelax>);

impl<T> Lock<T> {
    /// An unlocked lock holding `value`.
    pub const fn new(value: T) -> Lock<T> {
        Lock(SpinMutex::new(value))
    }

    /// Takes the lock, yielding the core while another thread holds it.
    #[inline]
    pub fn lock(&self) -> SpinMutexGuard<'_, T> {
        if cfg!(feature = "testing") {
            if let Some(g) = self.0.try_lock() {
                contention::lock_taken(false);
                return g;
            }
            contention::lock_taken(true);
        }
        self.0.lock()
    }

    /// The value, without locking (the caller has exclusive access, or the lock is known held by
    /// this thread or forgotten).
    #[inline]
    pub fn as_mut_ptr(&self) -> *mut T {
        self.0.as_mut_ptr()
    }

    /// The value, through exclusive access to the lock.
    #[inline]
    pub fn get_mut(&mut self) -> &mut T {
        self.0.get_mut()
    }

    /// Releases the lock whoever holds it (the fork child's release of what the parent took).
    ///
    /// # Safety
    /// The holder's guard must never be used or dropped afterwards (it was forgotten).
    #[inline]
    pub unsafe fn force_unlock(&self) {
        // SAFETY: the caller's contract is the spin lock's.
        unsafe { self.0.force_unlock() }
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
