//! The chunks: a 256 KiB region of slots of one size class (`chunk`), how a free slot is written
//! (`link`), the lock-free list of remote frees (`remote_list`) and the messages that travel on it (`message`), and the address map that says which
//! granules are chunks or spans (`addr_map`).

pub(crate) mod addr_map;
pub(crate) mod chunk;
pub(crate) mod link;
pub(crate) mod message;
pub(crate) mod remote_list;
