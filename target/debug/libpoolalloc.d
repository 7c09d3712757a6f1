/work/main/target/debug/libpoolalloc.rlib: /work/main/src/global.rs /work/main/src/lib.rs /work/main/src/stats.rs
