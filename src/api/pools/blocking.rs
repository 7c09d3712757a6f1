//! A fixed set of reusable resources shared by threads (connections, buffers): `acquire` waits until
//! one is free, in arrival order, and the resource goes back when its guard is dropped.

use std::collections::VecDeque;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The pool was shut down: no resource will be handed out any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shutdown;

impl fmt::Display for Shutdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the blocking pool was shut down")
    }
}
impl std::error::Error for Shutdown {}

/// Why `acquire_timeout` returned without a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireError {
    /// No resource became free in time.
    Timeout,
    /// The pool was shut down.
    Shutdown,
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AcquireError::Timeout => "no resource of the blocking pool became free in time",
            AcquireError::Shutdown => "the blocking pool was shut down",
        })
    }
}
impl std::error::Error for AcquireError {}

impl From<Shutdown> for AcquireError {
    fn from(_: Shutdown) -> Self {
        AcquireError::Shutdown
    }
}

struct State<T> {
    free: Vec<T>,
    /// Tickets of the threads waiting, in arrival order: only the front one may take a resource,
    /// so no waiter is starved by later arrivals.
    queue: VecDeque<u64>,
    next_ticket: u64,
    shutdown: bool,
}

/// A bounded pool of resources that makes threads wait (see the module docs).
///
/// ```
/// let pool = poolalloc::BlockingPool::new(vec![String::from("conn-1"), String::from("conn-2")]);
/// {
///     let c = pool.acquire().unwrap();
///     assert!(c.starts_with("conn"));
///     assert_eq!(pool.available(), 1);
/// } // returned here
/// assert_eq!(pool.available(), 2);
/// ```
pub struct BlockingPool<T> {
    state: Mutex<State<T>>,
    cv: Condvar,
}

impl<T> BlockingPool<T> {
    /// A pool of these resources.
    pub fn new(items: impl IntoIterator<Item = T>) -> Self {
        BlockingPool {
            state: Mutex::new(State {
                free: items.into_iter().collect(),
                queue: VecDeque::new(),
                next_ticket: 0,
                shutdown: false,
            }),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic while holding the lock cannot leave the state inconsistent (every update is a
        // single push or pop), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until a resource is free (first come, first served) and takes it.
    pub fn acquire(&self) -> Result<Pooled<'_, T>, Shutdown> {
        self.acquire_until(None).map_err(|_| Shutdown)
    }

    /// As [`acquire`](BlockingPool::acquire), giving up after `timeout`.
    pub fn acquire_timeout(&self, timeout: Duration) -> Result<Pooled<'_, T>, AcquireError> {
        self.acquire_until(Some(Instant::now() + timeout))
    }

    fn acquire_until(&self, deadline: Option<Instant>) -> Result<Pooled<'_, T>, AcquireError> {
        let mut s = self.lock();
        let ticket = s.next_ticket;
        s.next_ticket += 1;
        s.queue.push_back(ticket);
        loop {
            if s.shutdown {
                s.queue.retain(|&t| t != ticket);
                self.cv.notify_all();
                return Err(AcquireError::Shutdown);
            }
            if s.queue.front() == Some(&ticket) {
                if let Some(item) = s.free.pop() {
                    s.queue.pop_front();
                    // The next waiter may be able to go too.
                    self.cv.notify_all();
                    return Ok(Pooled {
                        pool: self,
                        item: Some(item),
                    });
                }
            }
            s = match deadline {
                None => self.cv.wait(s).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        s.queue.retain(|&t| t != ticket);
                        self.cv.notify_all();
                        return Err(AcquireError::Timeout);
                    }
                    self.cv
                        .wait_timeout(s, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    /// Takes a resource if one is free and nobody is waiting; never blocks.
    pub fn try_acquire(&self) -> Option<Pooled<'_, T>> {
        let mut s = self.lock();
        if s.shutdown || !s.queue.is_empty() {
            return None;
        }
        let item = s.free.pop()?;
        Some(Pooled {
            pool: self,
            item: Some(item),
        })
    }

    /// Wakes every waiter with [`Shutdown`]; later acquires fail. Resources in use still come back.
    pub fn shutdown(&self) {
        self.lock().shutdown = true;
        self.cv.notify_all();
    }

    /// Resources free right now.
    pub fn available(&self) -> usize {
        self.lock().free.len()
    }
}

/// Shows the counts, not the resources (they are behind the lock, and may be in use).
impl<T> fmt::Debug for BlockingPool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        f.debug_struct("BlockingPool")
            .field("available", &s.free.len())
            .field("waiting", &s.queue.len())
            .field("shutdown", &s.shutdown)
            .finish()
    }
}

/// A resource taken from a [`BlockingPool`]; it goes back when this is dropped.
pub struct Pooled<'a, T> {
    pool: &'a BlockingPool<T>,
    item: Option<T>,
}

impl<T: fmt::Debug> fmt::Debug for Pooled<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Pooled").field(&**self).finish()
    }
}

impl<T> Deref for Pooled<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.item.as_ref().expect("present until drop")
    }
}

impl<T> DerefMut for Pooled<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.item.as_mut().expect("present until drop")
    }
}

impl<T> Drop for Pooled<'_, T> {
    fn drop(&mut self) {
        if let Some(item) = self.item.take() {
            self.pool.lock().free.push(item);
            self.pool.cv.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_display_and_convert_into_boxed_errors() {
        fn acquire(pool: &BlockingPool<u8>) -> Result<u8, Box<dyn std::error::Error>> {
            Ok(*pool.acquire_timeout(Duration::from_millis(1))?)
        }
        let pool = BlockingPool::new([7]);
        assert_eq!(acquire(&pool).unwrap(), 7);
        let held = pool.acquire().unwrap();
        assert_eq!(format!("{held:?}"), "Pooled(7)");
        assert_eq!(
            format!("{pool:?}"),
            "BlockingPool { available: 0, waiting: 0, shutdown: false }"
        );
        let e = acquire(&pool).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no resource of the blocking pool became free in time"
        );
        pool.shutdown();
        assert_eq!(
            acquire(&pool).unwrap_err().to_string(),
            "the blocking pool was shut down"
        );
        assert_eq!(AcquireError::from(Shutdown), AcquireError::Shutdown);
    }

    #[test]
    fn acquire_release_and_try() {
        let pool = BlockingPool::new([1, 2]);
        let a = pool.acquire().unwrap();
        let b = pool.try_acquire().unwrap();
        assert!(pool.try_acquire().is_none());
        assert_eq!(*a + *b, 3);
        drop(a);
        assert_eq!(pool.available(), 1);
        drop(b);
        let c = pool.acquire_timeout(Duration::from_millis(1)).unwrap();
        assert!(*c == 1 || *c == 2);
        let _d = pool.acquire().unwrap();
        assert_eq!(
            pool.acquire_timeout(Duration::from_millis(20)).err(),
            Some(AcquireError::Timeout)
        );
        pool.shutdown();
        assert!(pool.acquire().is_err());
    }
}
