//! The lock used off the fast path: a spin lock that never allocates and yields the CPU while it
//! waits, so a holder that was preempted gets to run (pure spinning on 2 cores with more threads
//! than cores wastes whole time slices).

/// Spin lock whose waiters yield the core (`os::yield_now`) between attempts.
pub type Lock<T> = spin::mutex::SpinMutex<T, YieldRelax>;

/// Relax strategy: give the core away.
pub struct YieldRelax;

impl spin::RelaxStrategy for YieldRelax {
    #[inline]
    fn relax() {
        crate::os::yield_now();
    }
}
