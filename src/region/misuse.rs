//! What `hardened` reports about a bad free or resize of a region block, and how: a message, then
//! no return. With `std`, the message goes to stderr and the process aborts (as the pools'
//! checks do). Without `std` there is no abort to call: the report is a `panic!` with the message,
//! which the program's `#[panic_handler]` receives (the allocator's lock is released first, so a
//! handler that allocates does not deadlock).

/// A misuse the `hardened` checks found (only `hardened` builds report `Foreign`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "hardened"), allow(dead_code))]
pub enum Misuse {
    /// The block was already freed.
    DoubleFree,
    /// The pointer is not a block this allocator handed out.
    Foreign,
    /// The layout given does not match the block's (another size class, a larger size).
    SizeMismatch,
}

impl Misuse {
    fn message(self) -> &'static str {
        match self {
            Misuse::DoubleFree => "region: double free",
            Misuse::Foreign => "region: free of a pointer this allocator did not hand out",
            Misuse::SizeMismatch => "region: free with a layout the block was not allocated with",
        }
    }
}

/// Reports `m` and does not return.
#[cold]
#[inline(never)]
pub fn report(m: Misuse) -> ! {
    #[cfg(feature = "std")]
    {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "poolalloc: {}", m.message());
        std::process::abort()
    }
    #[cfg(not(feature = "std"))]
    panic!("poolalloc: {}", m.message())
}
