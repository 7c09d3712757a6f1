//! Aborting with a message, without allocating: what the allocator does when it must not go on (a
//! misuse `hardened` caught, an allocation inside `testing::forbid`). Never a panic: the allocator
//! must not unwind.

use core::fmt::{self, Write};

/// A message buffer on the stack: formatting into it allocates nothing; a longer message is cut.
struct StderrBuf {
    buf: [u8; 256],
    len: usize,
}

impl Write for StderrBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Prints `poolalloc: <message>` to stderr without allocating and aborts.
#[cold]
#[inline(never)]
pub fn fatal(args: fmt::Arguments<'_>) -> ! {
    let mut b = StderrBuf {
        buf: [0; 256],
        len: 0,
    };
    let _ = b.write_str("poolalloc: ");
    let _ = b.write_fmt(args);
    let _ = b.write_str("\n");
    crate::os::fatal_write_and_abort(&b.buf[..b.len])
}
