//! Text formatted into a buffer on the stack, for the places that must not allocate: the abort
//! message (`fatal`), warnings (`settings::say`) and the sizes in the statistics table. Text beyond
//! the buffer's room is cut.

use core::fmt::{self, Write};

/// Up to `N` bytes of text, formatted with `core::fmt` without allocating.
pub(crate) struct StackText<const N: usize> {
    buf: [u8; N],
    len: usize,
    /// Bytes `write_str` may fill (`N`, or `N - 1` for a line whose newline must stay).
    room: usize,
}

impl<const N: usize> StackText<N> {
    /// An empty text.
    pub(crate) const fn new() -> Self {
        StackText {
            buf: [0; N],
            len: 0,
            room: N,
        }
    }

    /// The line `poolalloc: <args>\n`; a long message is cut, its newline kept.
    pub(crate) fn message(args: fmt::Arguments<'_>) -> Self {
        const { assert!(N > 0) };
        let mut t = StackText {
            room: N - 1,
            ..Self::new()
        };
        let _ = t.write_str("poolalloc: ");
        let _ = t.write_fmt(args);
        t.buf[t.len] = b'\n';
        t.len += 1;
        t
    }

    /// The bytes written.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The text written, up to the last whole character (a cut may split one).
    pub(crate) fn as_str(&self) -> &str {
        match core::str::from_utf8(self.as_bytes()) {
            Ok(s) => s,
            Err(e) => core::str::from_utf8(&self.buf[..e.valid_up_to()]).unwrap_or(""),
        }
    }
}

impl<const N: usize> Write for StackText<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(self.room - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_its_room_and_a_message_keeps_its_newline() {
        let mut t = StackText::<8>::new();
        let _ = write!(t, "{}-abcdefgh", 1234);
        assert_eq!(t.as_str(), "1234-abc");
        let m = StackText::<16>::message(format_args!("a long {}", "message"));
        assert_eq!(m.as_bytes(), b"poolalloc: a lo\n");
        let mut u = StackText::<3>::new();
        let _ = u.write_str("aé");
        assert_eq!(u.as_str(), "aé");
        let mut c = StackText::<2>::new();
        let _ = c.write_str("aé");
        assert_eq!(c.as_str(), "a", "a split character is left out");
    }
}
