//! Aborting with a message, without allocating: what the allocator does when it must not go on (a
//! misuse `hardened` caught, an allocation inside `testing::forbid`). Never a panic: the allocator
//! must not unwind.

use crate::base::stack_text::StackText;
use core::fmt;

/// Prints `poolalloc: <message>` to stderr without allocating and aborts.
#[cold]
#[inline(never)]
pub fn fatal(args: fmt::Arguments<'_>) -> ! {
    crate::os::fatal_write_and_abort(StackText::<256>::message(args).as_bytes())
}
