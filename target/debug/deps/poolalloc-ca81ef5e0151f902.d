/work/main/target/debug/deps/poolalloc-ca81ef5e0151f902.d: src/lib.rs src/global.rs src/stats.rs

/work/main/target/debug/deps/libpoolalloc-ca81ef5e0151f902.rlib: src/lib.rs src/global.rs src/stats.rs

/work/main/target/debug/deps/libpoolalloc-ca81ef5e0151f902.rmeta: src/lib.rs src/global.rs src/stats.rs

src/lib.rs:
src/global.rs:
src/stats.rs:
