//! Deterministic text for the generated inputs (the SQL rows, the redis-cli values), drawn from
//! the harness's random number generator.

use crate::harness::rng::Rng;

/// `len` characters of [a-z0-9] (no quotes, no spaces: safe in SQL strings and redis-cli).
pub fn text(r: &mut Rng, len: usize) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..len)
        .map(|_| CHARS[r.below(CHARS.len())] as char)
        .collect()
}

/// Words of 2 to 10 such characters separated by spaces, `len` characters or a few more.
pub fn words(r: &mut Rng, len: usize) -> String {
    let mut s = String::with_capacity(len + 12);
    while s.len() < len {
        if !s.is_empty() {
            s.push(' ');
        }
        let w = 2 + r.below(9);
        s += &text(r, w);
    }
    s
}
