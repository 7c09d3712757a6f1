//! The one lock of a [`RegionAlloc`](super::RegionAlloc): a spin lock by default; with the
//! `critical-section` feature, a critical section (`critical_section::with`: interrupts off on a
//! single-core microcontroller), so interrupt handlers may allocate too. With the spin lock an
//! interrupt handler that allocates while the code it interrupted holds the lock spins forever.
//!
//! Either way the lock is const-constructible and never allocates.

#[cfg(not(feature = "critical-section"))]
pub struct Lock<T>(spin::mutex::SpinMutex<T>);

#[cfg(not(feature = "critical-section"))]
impl<T> Lock<T> {
    pub const fn new(value: T) -> Lock<T> {
        Lock(spin::mutex::SpinMutex::new(value))
    }

    /// Runs `f` with the value, the lock held.
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.lock())
    }
}

#[cfg(feature = "critical-section")]
pub struct Lock<T>(critical_section::Mutex<core::cell::RefCell<T>>);

#[cfg(feature = "critical-section")]
impl<T> Lock<T> {
    pub const fn new(value: T) -> Lock<T> {
        Lock(critical_section::Mutex::new(core::cell::RefCell::new(
            value,
        )))
    }

    /// Runs `f` with the value inside a critical section. The allocator never calls itself, so
    /// the `RefCell` is never borrowed twice.
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        critical_section::with(|cs| f(&mut self.0.borrow_ref_mut(cs)))
    }
}
