//! Where memory comes from and goes: chunks (`source`: fresh regions, spares, retained empty and
//! abandoned chunks, the purger's work), spans (`span`: a mapping per large block of the
//! size-less interface) and large blocks (`large`: the system allocator or spans).

pub(crate) mod large;
pub(crate) mod source;
pub(crate) mod span;
