//! Settings fixed in the program's code, in force before `main`: a `const` [`Settings`] given to
//! [`settings!`](crate::settings!) beside the `#[global_allocator]` static. The macro puts a
//! function in the platform's constructor section (`.init_array`, `__mod_init_func`, `.CRT$XCU`),
//! which applies them when the program starts, before Rust's `main` and before any allocation of
//! Rust code, at no cost to the allocation paths.
//!
//! Precedence, whatever runs first: a run-time setter (`set_purge_delay`, ...) wins over the
//! environment (`POOLALLOC_*`), the environment over these, these over the built-in defaults (as
//! jemalloc's `MALLOC_CONF` wins over the `malloc_conf` compiled in). A privileged process ignores
//! the environment, not these.

use crate::base::settings::{self, HugePages, LargeBlocks};
use core::time::Duration;

/// Settings for a program to fix in its code, applied before `main` by
/// [`settings!`](crate::settings!): each one left unset keeps its default (or what the environment
/// or a run-time setter says).
///
/// ```
/// use poolalloc::{HugePages, PoolAlloc, Settings};
/// use std::time::Duration;
///
/// #[global_allocator]
/// static GLOBAL: PoolAlloc = PoolAlloc::new();
/// poolalloc::settings!(
///     Settings::new()
///         .purge_delay(Duration::from_millis(100))
///         .retained_chunks(2)
///         .huge_pages(HugePages::Off)
/// );
///
/// fn main() {
///     # #[cfg(any(target_os = "linux", target_os = "macos", target_os = "freebsd", windows))]
///     assert_eq!(poolalloc::purge_delay(), Duration::from_millis(100));
/// }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    purge_delay_ms: Option<usize>,
    retained_chunks: Option<usize>,
    huge_pages: Option<HugePages>,
    large_blocks: Option<LargeBlocks>,
    show_stats: Option<bool>,
    verbose: Option<bool>,
}

impl Settings {
    /// No setting fixed: every one keeps its default.
    pub const fn new() -> Self {
        Settings {
            purge_delay_ms: None,
            retained_chunks: None,
            huge_pages: None,
            large_blocks: None,
            show_stats: None,
            verbose: None,
        }
    }

    /// The purge delay ([`set_purge_delay`](crate::set_purge_delay); `POOLALLOC_PURGE_DELAY_MS`),
    /// to the millisecond, at most a day (a longer one is taken as a day, as every value given in
    /// code is taken at its setting's nearest bound).
    pub const fn purge_delay(mut self, d: Duration) -> Self {
        let ms = d.as_millis();
        self.purge_delay_ms = Some(if ms > usize::MAX as u128 {
            usize::MAX
        } else {
            ms as usize
        });
        self
    }

    /// Empty chunks each size class keeps past the purge delay
    /// ([`set_retained_chunks`](crate::set_retained_chunks); `POOLALLOC_RETAINED_CHUNKS`), at
    /// most 4096.
    pub const fn retained_chunks(mut self, n: usize) -> Self {
        self.retained_chunks = Some(n);
        self
    }

    /// When chunk regions ask for transparent huge pages ([`set_huge_pages`](crate::set_huge_pages);
    /// `POOLALLOC_HUGE_PAGES`).
    pub const fn huge_pages(mut self, h: HugePages) -> Self {
        self.huge_pages = Some(h);
        self
    }

    /// Where `PoolAlloc`'s large blocks come from ([`set_large_blocks`](crate::set_large_blocks);
    /// `POOLALLOC_LARGE_BLOCKS`).
    pub const fn large_blocks(mut self, l: LargeBlocks) -> Self {
        self.large_blocks = Some(l);
        self
    }

    /// Whether `stats()` is printed to stderr at exit (`POOLALLOC_SHOW_STATS`).
    pub const fn show_stats(mut self, on: bool) -> Self {
        self.show_stats = Some(on);
        self
    }

    /// Whether the settings and anomalies are printed to stderr (`POOLALLOC_VERBOSE`).
    pub const fn verbose(mut self, on: bool) -> Self {
        self.verbose = Some(on);
        self
    }

    /// Applies them now, below the environment and the run-time setters. [`settings!`](crate::settings!)
    /// calls it before `main`; call it first thing in `main` on targets without constructors
    /// (wasm32, bare metal), where the macro does nothing.
    pub fn apply(&self) {
        settings::apply_in_code(
            self.purge_delay_ms,
            self.retained_chunks,
            self.huge_pages,
            self.large_blocks,
            self.show_stats,
            self.verbose,
        );
    }
}

/// Fixes [`Settings`] in the program's code: `poolalloc::settings!(Settings::new()...)` at the top
/// level of a crate (beside the `#[global_allocator]` static) applies them when the program starts,
/// before `main`, from the platform's constructor section (Linux, Android and FreeBSD
/// `.init_array`, macOS `__mod_init_func`, Windows `.CRT$XCU`; elsewhere it does nothing: call
/// [`Settings::apply`] at the start of `main`). The expression must be a constant. The
/// environment and the run-time setters win over it, whichever comes first; see
/// [`Settings`] for an example.
#[macro_export]
macro_rules! settings {
    ($settings:expr $(,)?) => {
        const _: () = {
            static SETTINGS: $crate::Settings = $settings;
            extern "C" fn poolalloc_apply_settings() {
                SETTINGS.apply()
            }
            #[used]
            #[cfg_attr(
                any(target_os = "linux", target_os = "android", target_os = "freebsd"),
                unsafe(link_section = ".init_array")
            )]
            #[cfg_attr(target_os = "macos", unsafe(link_section = "__DATA,__mod_init_func"))]
            #[cfg_attr(windows, unsafe(link_section = ".CRT$XCU"))]
            static POOLALLOC_SETTINGS_AT_START: extern "C" fn() = poolalloc_apply_settings;
        };
    };
}
