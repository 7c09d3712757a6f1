//! `redis`: a preloaded `redis-server` on the loopback address, driven by `redis-benchmark` (not
//! preloaded); every reply must be fine, and a fixed script of commands run with `redis-cli`
//! afterwards must print the same under every allocator.

use super::process::{check_preload_errors, run, tail, with_alloc};
use super::text::text;
use super::{Alloc, Outcome, Setup};
use crate::harness::rng::Rng;
use crate::harness::stats::geomean;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The redis-cli script: keys, lists, hashes, sets, sorted sets with values from 10 bytes to
/// 70 KB, then reads whose output depends on nothing but the data.
pub fn check_script() -> String {
    let mut r = Rng::new(0x5eed_0002);
    let mut s = String::new();
    s += "FLUSHALL\n";
    for i in 0..3000 {
        let len = if i % 50 == 0 {
            40_000 + r.below(30_000)
        } else {
            10 + r.below(3000)
        };
        let v = text(&mut r, len);
        let _ = writeln!(s, "SET k:{i} {v}");
        if i % 5 == 0 {
            let len = 1 + r.below(5000);
            let _ = writeln!(s, "APPEND k:{i} {}", text(&mut r, len));
        }
        let len = 1 + r.below(200);
        let _ = writeln!(s, "RPUSH l:{} {}", i % 40, text(&mut r, len));
        let len = 1 + r.below(800);
        let _ = writeln!(s, "HSET h:{} f:{i} {}", i % 60, text(&mut r, len));
        let _ = writeln!(s, "SADD s:{} m:{}", i % 30, r.below(100_000));
        let _ = writeln!(s, "ZADD z:{} {} m:{i}", i % 20, r.below(1_000_000));
    }
    for i in (0..3000).step_by(7) {
        let _ = writeln!(s, "GET k:{i}");
        let _ = writeln!(s, "STRLEN k:{i}");
    }
    for j in 0..40 {
        let _ = writeln!(s, "LRANGE l:{j} 0 -1");
        let _ = writeln!(s, "LPOP l:{j} 3");
    }
    for j in 0..60 {
        let _ = writeln!(s, "HLEN h:{j}");
        let _ = writeln!(s, "HGET h:{j} f:{j}");
    }
    for j in 0..30 {
        let _ = writeln!(s, "SCARD s:{j}");
        let _ = writeln!(s, "SORT s:{j} ALPHA");
    }
    for j in 0..20 {
        let _ = writeln!(s, "ZRANGE z:{j} 0 -1 WITHSCORES");
    }
    for i in (0..3000).step_by(2) {
        let _ = writeln!(s, "DEL k:{i}");
    }
    s += "DBSIZE\n";
    s
}

/// A port on 127.0.0.1 nobody listens on (now).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("cannot find a free port on 127.0.0.1")
        .port()
}

/// Whether a server on `port` answers PING.
fn ping(port: u16) -> bool {
    let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 16];
    c.write_all(b"PING\r\n").is_ok()
        && c.read(&mut buf)
            .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
}

/// `redis-cli` against `port`, not preloaded.
fn cli(port: u16) -> Command {
    let mut c = Command::new("redis-cli");
    c.args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .env_remove("LD_PRELOAD");
    c
}

/// The benchmark runs: (value size, pipeline depth, key space, share of the requests, tests).
const REDIS_RUNS: [(usize, usize, usize, usize, &str); 3] = [
    (
        32,
        16,
        100_000,
        100,
        "set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,mset",
    ),
    (2000, 4, 20_000, 20, "set,get,lpush,lpop,sadd,hset,mset"),
    (50_000, 1, 500, 4, "set,get,mset"),
];

/// A redis-server that is killed if the benchmark panics before shutting it down.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// One run: the server started under `a`, benchmarked, checked, stopped. The figure is the
/// geometric mean of every test's requests per second, the RSS the server's `VmHWM`.
pub fn measure(a: &Alloc, s: &Setup, scratch: &Path) -> Outcome {
    let port = free_port();
    let mut server = start(a, port, scratch);
    let tests = benchmark(a, s, port, scratch);
    let output = check(a, s, port, scratch);
    let hwm = stop(a, &mut server.0, port, scratch);
    let rps: Vec<f64> = tests.iter().map(|t| t.1).collect();
    Outcome {
        figure: geomean(&rps),
        cpu: 0.0,
        rss: hwm,
        output,
        tests,
    }
}

/// What the server wrote to stdout and stderr in `scratch`.
fn server_log(scratch: &Path) -> String {
    format!(
        "{}\n{}",
        std::fs::read_to_string(scratch.join("server.log")).unwrap_or_default(),
        std::fs::read_to_string(scratch.join("server.err")).unwrap_or_default()
    )
}

/// `redis-server` under `a` on `port`, once it answers PING (at most 20 s).
fn start(a: &Alloc, port: u16, scratch: &Path) -> Server {
    let log = scratch.join("server.log");
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--dir")
        .arg(scratch)
        .stdout(File::create(&log).unwrap())
        .stderr(Stdio::from(
            File::create(scratch.join("server.err")).unwrap(),
        ))
        .stdin(Stdio::null());
    with_alloc(&mut cmd, a);
    let mut server = Server(
        cmd.spawn()
            .unwrap_or_else(|e| panic!("cannot start redis-server: {e}")),
    );
    let child = &mut server.0;
    let started = Instant::now();
    while !ping(port) {
        if let Ok(Some(st)) = child.try_wait() {
            panic!(
                "redis-server under {} exited ({st}) before answering:\n{}",
                a.name,
                server_log(scratch)
            );
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!(
                "redis-server under {} did not answer PING in 20 s:\n{}",
                a.name,
                server_log(scratch)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    check_preload_errors("redis-server", server_log(scratch).as_bytes());
    server
}

/// `redis-benchmark` (not preloaded) against the server on `port`, each run of [`REDIS_RUNS`]:
/// requests per second of every test, named with its value size and pipeline depth.
fn benchmark(a: &Alloc, s: &Setup, port: u16, scratch: &Path) -> Vec<(String, f64)> {
    let n = if s.quick { 40_000 } else { 200_000 };
    let mut tests = Vec::new();
    for (k, (size, pipeline, keys, share, names)) in REDIS_RUNS.iter().enumerate() {
        let mut cmd = Command::new("redis-benchmark");
        cmd.args(["-h", "127.0.0.1", "-p", &port.to_string(), "--csv", "-q"])
            .args(["-n", &(n * share / 100).to_string()])
            .args(["-d", &size.to_string()])
            .args(["-P", &pipeline.to_string()])
            .args(["-r", &keys.to_string()])
            .args(["-t", names])
            .env_remove("LD_PRELOAD");
        let dir = scratch.join(format!("bench{k}"));
        std::fs::create_dir_all(&dir).unwrap();
        let f = run(
            &format!(
                "redis-benchmark -d {size} against redis-server under {}",
                a.name
            ),
            &mut cmd,
            None,
            &dir,
        );
        let csv = String::from_utf8_lossy(&f.stdout);
        let before = tests.len();
        for line in csv.lines().filter(|l| !l.starts_with("\"test\"")) {
            let cells: Vec<&str> = line.split(',').map(|c| c.trim_matches('"')).collect();
            let rps: f64 = cells
                .get(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or_else(|| panic!("unexpected redis-benchmark line: {line}"));
            assert!(rps > 0.0, "redis-benchmark reported 0 requests/s: {line}");
            // "LPUSH (needed to benchmark LRANGE)", "LRANGE_100 (first 100 elements)", ...
            let test = if cells[0].contains("needed to benchmark LRANGE") {
                "LPUSH for LRANGE"
            } else {
                cells[0].split(' ').next().unwrap_or(cells[0])
            };
            tests.push((format!("{test} {size}B P{pipeline}"), rps));
        }
        let expected = names.split(',').count() + usize::from(names.contains("lrange")); // LRANGE first fills a list (its own line)
        assert_eq!(
            tests.len() - before,
            expected,
            "redis-benchmark printed {} results for {expected} tests:\n{csv}",
            tests.len() - before
        );
    }
    tests
}

/// Checks that the server sent no error reply, runs the check script and returns its output
/// (which must be the same under every allocator).
fn check(a: &Alloc, s: &Setup, port: u16, scratch: &Path) -> Vec<u8> {
    // Every reply fine: the server counted no error reply.
    let mut info = cli(port);
    info.args(["INFO", "stats"]);
    let f = run("redis-cli INFO stats", &mut info, None, scratch);
    let stats = String::from_utf8_lossy(&f.stdout).to_string();
    let errors = stats
        .lines()
        .find_map(|l| l.strip_prefix("total_error_replies:"))
        .unwrap_or_else(|| panic!("no total_error_replies in INFO stats:\n{stats}"));
    assert_eq!(
        errors.trim(),
        "0",
        "redis-server under {} sent error replies during the benchmark:\n{stats}",
        a.name
    );
    // The same commands must print the same under every allocator.
    let mut check = cli(port);
    let f = run(
        &format!(
            "redis-cli check script against redis-server under {}",
            a.name
        ),
        &mut check,
        Some(&s.redis_check),
        scratch,
    );
    let output = f.stdout;
    let mut info = cli(port);
    info.args(["INFO", "stats"]);
    let f = run("redis-cli INFO stats", &mut info, None, scratch);
    assert!(
        String::from_utf8_lossy(&f.stdout).contains("total_error_replies:0"),
        "the check script got error replies from redis-server under {}:\n{}",
        a.name,
        tail(&output)
    );
    output
}

/// The server's peak RSS in bytes (`VmHWM`), then its shutdown, which must be clean.
fn stop(a: &Alloc, server: &mut Child, port: u16, scratch: &Path) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.id()))
        .expect("cannot read the server's /proc status");
    let hwm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in /proc/{}/status", server.id()));
    let mut shutdown = cli(port);
    shutdown.args(["SHUTDOWN", "NOSAVE"]);
    // redis-cli reports the connection the server closed; its exit status is not the server's.
    let _ = shutdown.output();
    let st = server.wait().expect("cannot wait for redis-server");
    assert!(
        st.success(),
        "redis-server under {} ended with {st}:\n{}",
        a.name,
        server_log(scratch)
    );
    hwm_kib * 1024
}

/// The bindings check's command: the server's version.
pub fn probe() -> Command {
    let mut c = Command::new("redis-server");
    c.arg("--version");
    c
}
