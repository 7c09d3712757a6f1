//! The Prometheus exporter example, scraped over loopback: its server code (the example's own
//! `server.rs`) runs here with `PoolAlloc` installed, and each scrape is parsed as the text
//! exposition format and checked against what the test itself allocated.

#[path = "../examples/prometheus_exporter/server.rs"]
mod server;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

/// One HTTP GET: (status line, headers and body as text).
fn get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("no end of headers");
    let status = head.lines().next().unwrap().to_string();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("no Content-Length")
        .parse()
        .unwrap();
    assert_eq!(length, body.len(), "Content-Length does not match the body");
    (status + "\n" + head, body.to_string())
}

/// Parses the exposition format: every sample by its name and labels; checks that each sample
/// follows its family's `# TYPE` line, that counters end in `_total`, and that values are numbers.
fn parse(body: &str) -> HashMap<String, f64> {
    let mut samples = HashMap::new();
    let mut family: Option<(String, String)> = None;
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE line without a type");
            assert!(matches!(kind, "gauge" | "counter"), "type {kind}");
            if kind == "counter" {
                assert!(name.ends_with("_total"), "counter {name} not named _total");
            }
            family = Some((name.to_string(), kind.to_string()));
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(!line.starts_with('#'), "unknown comment {line:?}");
        let (key, value) = line.rsplit_once(' ').expect("sample without a value");
        let name = key.split('{').next().unwrap();
        assert!(name.starts_with("poolalloc_"), "{name}");
        let (fname, _) = family.as_ref().expect("sample before any TYPE line");
        assert_eq!(name, fname, "sample {name} outside its family {fname}");
        if let Some(labels) = key.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(
                    labels.starts_with("{slot_size=\"") && labels.ends_with("\"}"),
                    "labels {labels}"
                );
            }
        }
        let v: f64 = value.parse().unwrap_or_else(|_| panic!("value {value:?}"));
        assert!(
            samples.insert(key.to_string(), v).is_none(),
            "duplicate {key}"
        );
    }
    samples
}

#[test]
fn scrapes_over_loopback() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || server::serve(&listener, || stop.load(Ordering::Relaxed)))
    };

    let (status, _) = get(addr, "/nothing");
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");

    let (status, before) = get(addr, "/metrics");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(
        status.contains("Content-Type: text/plain; version=0.0.4"),
        "{status}"
    );
    let before = parse(&before);

    // Blocks of one class held across the second scrape, and a large block.
    const N: usize = 5000;
    const SIZE: usize = 48;
    let held: Vec<Box<[u8; SIZE]>> = (0..N).map(|_| Box::new([7u8; SIZE])).collect();
    let large = vec![1u8; 1 << 20];
    let (_, after) = get(addr, "/metrics");
    let after = parse(&after);
    let slot = poolalloc::class_sizes()
        .iter()
        .find(|&&s| s >= SIZE)
        .copied()
        .unwrap();
    let class_key = format!("poolalloc_class_live_slots{{slot_size=\"{slot}\"}}");

    let d = |k: &str| after[k] - before[k];
    // Other threads of this test binary are quiet: the figures move by what we did (the server
    // thread and the scrapes allocate too, so "at least").
    assert!(
        d(&class_key) >= N as f64,
        "{class_key} moved {}",
        d(&class_key)
    );
    assert!(d("poolalloc_live_bytes") >= (N * slot) as f64);
    assert!(d("poolalloc_allocations_total") >= N as f64);
    assert!(d("poolalloc_large_blocks") >= 1.0);
    assert!(d("poolalloc_large_bytes") >= (1 << 20) as f64);
    assert!(d("poolalloc_allocated_bytes_total") >= (N * slot + (1 << 20)) as f64);
    for k in before.keys().filter(|k| k.contains("_total")) {
        assert!(after[k] >= before[k], "counter {k} went back");
    }
    assert!(after["poolalloc_peak_reserved_bytes"] >= after["poolalloc_reserved_bytes"]);
    assert!(after["poolalloc_chunks_mapped_total"] >= 1.0);
    if poolalloc::stats().rss_bytes.is_some() {
        assert!(after["poolalloc_rss_bytes"] > 0.0);
    }

    drop(held);
    drop(large);
    let (_, last) = get(addr, "/metrics");
    let last = parse(&last);
    // The scrape's own map holds one key string per sample, some of them of this class.
    let slack = last.len() as f64;
    assert!(
        last[&class_key] + N as f64 <= after[&class_key] + slack,
        "{class_key}: {} before, {} held, {} dropped",
        before[&class_key],
        after[&class_key],
        last[&class_key]
    );
    assert!(last["poolalloc_frees_total"] - after["poolalloc_frees_total"] >= (N + 1) as f64);

    stop.store(true, Ordering::Relaxed);
    // One more connection wakes the server to see the stop, unless it saw it already after the
    // last scrape (then nobody listens any more and the connection fails).
    if let Ok(mut s) = TcpStream::connect(addr) {
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n");
        let _ = s.read_to_end(&mut Vec::new());
    }
    server.join().unwrap().unwrap();
}
