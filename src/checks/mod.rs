//! The optional code of the data path, each behind its feature: the misuse checks (`hardened`,
//! with no-op twins when off), the `testing` feature's hooks (`hooks`) and the sampling heap
//! profiler (`profile`, feature `profiling`).

if_pools! {
    pub(crate) mod hardened;
}
#[cfg(feature = "testing")]
pub(crate) mod hooks;
#[cfg(feature = "profiling")]
pub mod profile;
