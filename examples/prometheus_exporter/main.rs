//! Serves `poolalloc::stats()` to Prometheus on a loopback port, while a few threads allocate,
//! free and exchange blocks so that the figures move.
//!
//! ```text
//! cargo run --release --example prometheus_exporter -- 9898
//! curl -s localhost:9898/metrics | grep -v '^#'
//! ```
//!
//! A scrape config for it: `static_configs: [{targets: ["127.0.0.1:9898"]}]`. The server is
//! `server.rs` (the test `tests/prometheus_exporter.rs` scrapes that same code).

mod server;

use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(9898);
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    println!(
        "serving http://{}/metrics (Ctrl-C to stop)",
        listener.local_addr()?
    );
    // A workload: one thread builds batches of strings that another drops (remote frees), in
    // waves, so live bytes rise and fall and the counters grow.
    let (tx, rx) = mpsc::sync_channel::<Vec<String>>(4);
    std::thread::spawn(move || {
        for wave in 0u64.. {
            let n = 1000 + (wave % 10) as usize * 2000;
            let batch = (0..n).map(|i| format!("item {i} of wave {wave}")).collect();
            if tx.send(batch).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    std::thread::spawn(move || {
        for batch in rx {
            drop(batch);
        }
    });
    server::serve(&listener, || false)
}
