//! Real programs under four allocators: glibc malloc, Debian's jemalloc and mimalloc, and
//! `libpoolalloc_c.so`, each put in place with `LD_PRELOAD`.
//!
//! `cargo bench -p poolalloc-c --bench programs` (five interleaved rounds) or `-- --quick` (small
//! inputs, two rounds). An argument that does not start with `-` keeps only the workloads whose
//! name contains it. Writes `target/poolalloc-report/programs.md` and `programs.png` and prints the
//! table.
//!
//! The workloads, each run as its own process(es) per allocator and round, rounds interleaved
//! (every round runs every allocator once, in a rotating order), medians reported:
//! - `redis`: a preloaded `redis-server` on the loopback address, driven by `redis-benchmark`
//!   (not preloaded) with small pipelined values, medium values and values above 32 KiB; the
//!   figure is the geometric mean of the requests per second of every test, the RSS is the
//!   server's `VmHWM`. Every reply must be fine (`total_error_replies:0`) and a fixed script of
//!   commands run with `redis-cli` afterwards must print the same under every allocator.
//! - `sqlite`: `sqlite3` on an in-memory database runs a generated script (bulk inserts of text
//!   rows, some above 32 KiB, index creation, joins, group-bys, a window function, updates,
//!   deletes, `VACUUM`, an integrity check); its output must be the same under every allocator.
//! - `python` and `python-malloc`: CPython runs a standard-library workload (dicts, lists,
//!   strings, objects with reference cycles, JSON, big buffers, a producer and a consumer thread),
//!   once with its own small-object allocator (as people run it) and once with
//!   `PYTHONMALLOC=malloc`, so that every object comes from the allocator under test. Its output
//!   (digests of what it built) must be the same under every allocator.
//! - `gcc`: `gcc -O2 -c` on mimalloc's single-file builds (`static.c`), found in the cargo
//!   registry's `libmimalloc-sys` sources, one file after the other (`SOURCE_DATE_EPOCH=0`, as
//!   they embed `__DATE__`); the objects must be byte-identical under every allocator.
//! - `larson-cpp`: a larson-style exchange in C++ with sized delete (`programs/larson.cpp`, built
//!   with g++ here): two threads each replace random objects of 16 B to 1 KiB in a working set of
//!   5000 with `::operator delete(p, size)` and `::operator new(size)`, and hand their sets on after
//!   every round, so that most frees are of objects the other thread made. Its checksum must be
//!   the same under every allocator.
//!
//! Time is wall-clock from the start of the process to its end (`wait4`); peak RSS is `wait4`'s
//! `ru_maxrss`, which on Linux is the largest of the process and of the descendants it waited for,
//! so `gcc` counts `cc1` and `as`.
//!
//! "glibc" preloads `libc.so.6` itself: a program linked against another allocator (Debian links
//! `redis-server` with `libjemalloc.so.2`) then still gets glibc's `malloc`, because preloaded
//! objects come before the program's own libraries in symbol lookup. Before measuring, every
//! program is run once per allocator with `LD_DEBUG=bindings` and the benchmark fails unless
//! `malloc` and `free` bind to the intended library in every process it started.
//!
//! The library: `POOLALLOC_TEST_C_SO=<path>` if set, else built with `$CARGO build --release -p
//! poolalloc-c` in its own target directory (`target/capi-bench`: the running `cargo bench` holds
//! the lock of the usual one). A `POOLALLOC_TEST_C_SO` whose file name is not `libpoolalloc_c.so`
//! (a stand-in while the library is being written) is named as such in the report.
//!
//! Missing programs or peers make the benchmark fail with a message naming `bash .ci/deps`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
const MIMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2";
const LIBC: [&str; 2] = [
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
];
const DEPS: &str = "run `bash .ci/deps` (as root) in the repository";

/// Column order everywhere: poolalloc first, then glibc, jemalloc, mimalloc.
const NAMES: [&str; 4] = ["poolalloc", "glibc", "jemalloc", "mimalloc"];

struct Alloc {
    name: &'static str,
    preload: PathBuf,
}

// ------------------------------------------------------------------------------------------------
// Running a process and measuring it.

struct Finished {
    secs: f64,
    cpu: f64,    // user + system seconds, children included
    maxrss: u64, // bytes
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Runs `cmd` to its end with stdout and stderr in files of `scratch` and stdin from `stdin` (or
/// nothing), and measures it with `wait4`. Panics, naming `what`, if it does not exit with 0 or
/// if the dynamic linker refused a preloaded library.
fn run(what: &str, cmd: &mut Command, stdin: Option<&Path>, scratch: &Path) -> Finished {
    let out_path = scratch.join("stdout");
    let err_path = scratch.join("stderr");
    cmd.stdout(File::create(&out_path).expect("cannot create a scratch file"))
        .stderr(File::create(&err_path).expect("cannot create a scratch file"))
        .stdin(match stdin {
            Some(p) => Stdio::from(
                File::open(p).unwrap_or_else(|e| panic!("cannot open {}: {e}", p.display())),
            ),
            None => Stdio::null(),
        });
    let start = Instant::now();
    // Reaped by `wait4` below, which also gives the resource usage `Child::wait` would not.
    #[allow(clippy::zombie_processes)]
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start {:?}: {e}", cmd.get_program()));
    let (status, usage) = wait4(&child);
    let secs = start.elapsed().as_secs_f64();
    let stdout = std::fs::read(&out_path).unwrap();
    let stderr = std::fs::read(&err_path).unwrap();
    let fine = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    assert!(
        fine,
        "{what} failed (wait status {status:#x}, {}):\nstdout (end):\n{}\nstderr (end):\n{}",
        describe_status(status),
        tail(&stdout),
        tail(&stderr)
    );
    check_preload_errors(what, &stderr);
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Finished {
        secs,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        maxrss: usage.ru_maxrss as u64 * 1024,
        stdout,
        stderr,
    }
}

/// Waits for `child` (which nobody has waited for) and returns its wait status and resource usage.
fn wait4(child: &Child) -> (i32, libc::rusage) {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: all-zero bytes are a valid `rusage` (a struct of integers).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is a child of this process that has not been reaped (`Child::wait` is
        // never called on it), and `status` and `usage` are valid, writable, exclusively borrowed
        // locals for the duration of the call.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            return (status, usage);
        }
        let e = std::io::Error::last_os_error();
        assert!(
            e.kind() == std::io::ErrorKind::Interrupted,
            "wait4({pid}) failed: {e}"
        );
    }
}

fn describe_status(status: i32) -> String {
    if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else if libc::WIFEXITED(status) {
        format!("exit code {}", libc::WEXITSTATUS(status))
    } else {
        "stopped".into()
    }
}

fn tail(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

fn check_preload_errors(what: &str, stderr: &[u8]) {
    let s = String::from_utf8_lossy(stderr);
    assert!(
        !s.contains("cannot be preloaded"),
        "{what}: the dynamic linker did not preload the allocator:\n{s}"
    );
}

fn with_alloc(cmd: &mut Command, a: &Alloc) {
    cmd.env("LD_PRELOAD", &a.preload);
}

// ------------------------------------------------------------------------------------------------
// Deterministic inputs.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// `len` characters of [a-z0-9] (no quotes, no spaces: safe in SQL strings and redis-cli).
    fn text(&mut self, len: usize) -> String {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        (0..len)
            .map(|_| CHARS[self.below(CHARS.len() as u64) as usize] as char)
            .collect()
    }
    fn words(&mut self, len: usize) -> String {
        let mut s = String::with_capacity(len + 12);
        while s.len() < len {
            if !s.is_empty() {
                s.push(' ');
            }
            let w = 2 + self.below(9) as usize;
            s += &self.text(w);
        }
        s
    }
}

/// The SQL script: `orders` rows with text payloads (one in 500 above 32 KiB), customers, indexes,
/// joins, group-bys, a window function, updates, deletes, a derived table, VACUUM, an integrity
/// check. Only aggregates are printed.
fn sqlite_script(orders: usize) -> String {
    let mut r = Rng(0x5eed_0001);
    let customers = orders / 10;
    let cities = [
        "amsterdam",
        "berlin",
        "cairo",
        "delhi",
        "edinburgh",
        "florence",
        "geneva",
        "hanoi",
        "istanbul",
        "jakarta",
        "kyoto",
        "lima",
    ];
    let statuses = ["new", "paid", "shipped", "returned", "cancelled"];
    let mut s = String::with_capacity(orders * 260);
    s += ".bail on\n";
    s += "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL, note TEXT);\n";
    s += "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER NOT NULL, amount INTEGER NOT NULL, status TEXT NOT NULL, payload TEXT NOT NULL);\n";
    s += "BEGIN;\n";
    for chunk in (1..=customers).collect::<Vec<_>>().chunks(200) {
        s += "INSERT INTO customers VALUES ";
        for (k, id) in chunk.iter().enumerate() {
            if k > 0 {
                s += ",";
            }
            let len = 6 + r.below(20) as usize;
            let name = r.words(len);
            let city = cities[r.below(cities.len() as u64) as usize];
            let len = r.below(120) as usize;
            let note = r.words(len);
            let _ = write!(s, "({id},'{name}','{city}','{note}')");
        }
        s += ";\n";
    }
    for chunk in (1..=orders).collect::<Vec<_>>().chunks(200) {
        s += "INSERT INTO orders VALUES ";
        for (k, id) in chunk.iter().enumerate() {
            if k > 0 {
                s += ",";
            }
            let customer = 1 + r.below(customers as u64);
            let amount = r.below(100_000);
            let status = statuses[r.below(statuses.len() as u64) as usize];
            let len = if r.below(500) == 0 {
                33_000 + r.below(20_000) as usize
            } else {
                16 + r.below(400) as usize
            };
            let payload = r.words(len);
            let _ = write!(s, "({id},{customer},{amount},'{status}','{payload}')");
        }
        s += ";\n";
    }
    s += "COMMIT;\n";
    s += "\
SELECT 'rows', count(*), sum(amount), sum(length(payload)) FROM orders;
CREATE INDEX orders_customer ON orders(customer);
CREATE INDEX orders_status_amount ON orders(status, amount);
CREATE INDEX customers_city ON customers(city, name);
SELECT 'by city', c.city, count(*), sum(o.amount), sum(length(o.payload)) FROM orders o JOIN customers c ON c.id = o.customer GROUP BY c.city ORDER BY c.city;
SELECT 'by status', status, count(*), max(amount), min(amount) FROM orders GROUP BY status ORDER BY status;
SELECT 'top customers', c.id, c.name, sum(o.amount) AS s FROM customers c JOIN orders o ON o.customer = c.id GROUP BY c.id ORDER BY s DESC, c.id LIMIT 20;
SELECT 'ranked', count(*), sum(amount) FROM (SELECT customer, amount, rank() OVER (PARTITION BY customer ORDER BY amount DESC, id) AS rk FROM orders) WHERE rk <= 3;
SELECT 'names', city, length(group_concat(name, ',')) FROM (SELECT city, name FROM customers ORDER BY city, name) GROUP BY city ORDER BY city;
SELECT 'sorted', sum(length(p)) FROM (SELECT payload AS p FROM orders ORDER BY substr(payload, 3, 12), id LIMIT 5000);
SELECT 'words', count(DISTINCT substr(payload, 1, 5)) FROM orders;
UPDATE orders SET payload = payload || ' ' || status || ' updated' WHERE id % 7 = 0;
UPDATE customers SET note = upper(note) WHERE id % 3 = 0;
DELETE FROM orders WHERE amount % 3 = 0;
CREATE TABLE summary AS SELECT customer, count(*) AS n, sum(amount) AS s, max(length(payload)) AS m FROM orders GROUP BY customer;
SELECT 'summary', count(*), sum(n), sum(s), max(m) FROM summary;
SELECT 'paid by city', c.city, count(*) FROM orders o JOIN customers c ON c.id = o.customer WHERE o.status = 'paid' AND o.amount > 50000 GROUP BY c.city ORDER BY c.city;
DROP INDEX orders_status_amount;
DELETE FROM customers WHERE id NOT IN (SELECT customer FROM orders);
VACUUM;
PRAGMA integrity_check;
SELECT 'after', (SELECT count(*) FROM orders), (SELECT count(*) FROM customers), (SELECT sum(length(payload)) FROM orders);
";
    s
}

const PYTHON_WORKLOAD: &str = r#"
import gc, hashlib, json, queue, random, sys, threading

scale = int(sys.argv[1])
rng = random.Random(20261123)
letters = "abcdefghijklmnopqrstuvwxyz"
vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randrange(2, 12))) for _ in range(5000)]
results = {}

def word():
    return vocabulary[rng.randrange(len(vocabulary))]

# Records: dicts holding lists, strings, numbers, nested dicts; through JSON and back.
records = []
for i in range(12000 * scale):
    records.append({
        "id": i,
        "name": word() + " " + word(),
        "tags": [word() for _ in range(rng.randrange(1, 9))],
        "score": rng.random(),
        "nested": {"a": i % 97, "b": [i, i * 2, str(i)], "c": {"d": word()}},
    })
text = json.dumps(records)
back = json.loads(text)
assert back == records
results["json"] = [len(text), hashlib.sha256(text.encode()).hexdigest()]
pretty = json.dumps(back[: 2000 * scale], indent=2, sort_keys=True)
results["pretty"] = hashlib.sha256(pretty.encode()).hexdigest()
del back, text, pretty

# Strings: counting, joining, splitting, formatting.
counts = {}
for r in records:
    for t in r["tags"]:
        counts[t] = counts.get(t, 0) + 1
results["top"] = ["%s=%d" % kv for kv in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]]
doc = "\n".join(" ".join(r["tags"]) for r in records)
results["doc"] = [len(doc.split()), hashlib.sha256(doc.upper().replace("A", "aa").encode()).hexdigest()]
lines = [f"{r['id']:08d}|{r['name']:<30}|{r['score']:.6f}" for r in records]
lines.sort(key=lambda l: l[9:])
results["lines"] = hashlib.sha256("".join(lines).encode()).hexdigest()
del doc, lines

# Objects with reference cycles: trees built, half cut off, rebuilt; the collector frees cycles.
class Node:
    def __init__(self, key, parent):
        self.key = key
        self.parent = parent
        self.children = []
        self.label = "node-%d" % key

total = 0
for rnd in range(8 * scale):
    root = Node(0, None)
    frontier = [root]
    key = 1
    while key < 20000:
        parent = frontier[rng.randrange(len(frontier))]
        child = Node(key, parent)
        parent.children.append(child)
        frontier.append(child)
        key += 1
    for n in frontier[::2]:
        n.children = n.children[: len(n.children) // 2]
    stack, seen = [root], 0
    while stack:
        n = stack.pop()
        seen += n.key % 1000
        stack.extend(n.children)
    total += seen
    del root, frontier, stack
    gc.collect()
results["trees"] = total

# Big buffers and long lists (beyond 32 KiB), grown, sliced and dropped.
digest = hashlib.sha256()
keep = []
for i in range(400 * scale):
    size = 32768 + rng.randrange(0, 400000)
    b = bytearray(size)
    b[::4097] = bytes([i % 251]) * len(b[::4097])
    digest.update(bytes(b[:64]))
    lst = list(range(size // 64))
    lst.extend(lst[: len(lst) // 3])
    keep.append((b, lst))
    if len(keep) > 20:
        keep.pop(rng.randrange(len(keep)))
results["buffers"] = [digest.hexdigest(), sum(len(b) for b, _ in keep)]
del keep

# A producer thread builds batches; the main thread consumes and drops them (cross-thread frees).
q = queue.Queue(maxsize=64)
def produce(seed, n):
    prng = random.Random(seed)
    for i in range(n):
        q.put([{"k": prng.randrange(1000), "v": "x" * prng.randrange(1, 300)} for _ in range(200)])
    q.put(None)
producer = threading.Thread(target=produce, args=(7, 600 * scale))
producer.start()
acc = 0
while True:
    batch = q.get()
    if batch is None:
        break
    acc += sum(d["k"] + len(d["v"]) for d in batch)
producer.join()
results["threads"] = acc

print(json.dumps(results, sort_keys=True))
"#;

/// The redis-cli script: keys, lists, hashes, sets, sorted sets with values from 10 bytes to
/// 70 KB, then reads whose output depends on nothing but the data.
fn redis_check_script() -> String {
    let mut r = Rng(0x5eed_0002);
    let mut s = String::new();
    s += "FLUSHALL\n";
    for i in 0..3000 {
        let len = if i % 50 == 0 {
            40_000 + r.below(30_000) as usize
        } else {
            10 + r.below(3000) as usize
        };
        let v = r.text(len);
        let _ = writeln!(s, "SET k:{i} {v}");
        if i % 5 == 0 {
            let len = 1 + r.below(5000) as usize;
            let _ = writeln!(s, "APPEND k:{i} {}", r.text(len));
        }
        let len = 1 + r.below(200) as usize;
        let _ = writeln!(s, "RPUSH l:{} {}", i % 40, r.text(len));
        let len = 1 + r.below(800) as usize;
        let _ = writeln!(s, "HSET h:{} f:{i} {}", i % 60, r.text(len));
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

// ------------------------------------------------------------------------------------------------
// Workloads.

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Redis,
    Sqlite,
    Python,
    PythonMalloc,
    Gcc,
    Larson,
}

struct Workload {
    name: &'static str,
    kind: Kind,
}

const WORKLOADS: [Workload; 6] = [
    Workload {
        name: "redis",
        kind: Kind::Redis,
    },
    Workload {
        name: "sqlite",
        kind: Kind::Sqlite,
    },
    Workload {
        name: "python",
        kind: Kind::Python,
    },
    Workload {
        name: "python-malloc",
        kind: Kind::PythonMalloc,
    },
    Workload {
        name: "gcc",
        kind: Kind::Gcc,
    },
    Workload {
        name: "larson-cpp",
        kind: Kind::Larson,
    },
];

/// What a workload's run gives: its figure (seconds, or requests per second for redis), its peak
/// RSS in bytes, and the output that must be the same under every allocator.
struct Outcome {
    figure: f64,
    /// User + system seconds of the measured processes (0 for redis: not measured).
    cpu: f64,
    rss: u64,
    output: Vec<u8>,
    /// redis only: requests per second of each test, by name.
    tests: Vec<(String, f64)>,
}

struct Setup {
    quick: bool,
    work: PathBuf,
    sql: PathBuf,
    py: PathBuf,
    python: PathBuf,
    redis_check: PathBuf,
    gcc_units: Vec<(PathBuf, PathBuf)>, // (include dir, static.c)
    /// `programs/larson.cpp`, built with g++.
    larson: PathBuf,
}

fn run_workload(w: &Workload, a: &Alloc, s: &Setup) -> Outcome {
    let scratch = s.work.join(format!("run-{}-{}", w.name, a.name));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let what = format!("{} under {}", w.name, a.name);
    match w.kind {
        Kind::Redis => redis(a, s, &scratch),
        Kind::Sqlite => {
            let mut cmd = Command::new("sqlite3");
            cmd.arg(":memory:");
            with_alloc(&mut cmd, a);
            let f = run(&what, &mut cmd, Some(&s.sql), &scratch);
            assert!(
                f.stderr.is_empty(),
                "{what} wrote to stderr:\n{}",
                tail(&f.stderr)
            );
            outcome(f)
        }
        Kind::Python | Kind::PythonMalloc => {
            let mut cmd = Command::new(&s.python);
            cmd.arg(&s.py)
                .arg(if s.quick { "1" } else { "4" })
                .env("PYTHONHASHSEED", "0")
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .env_remove("PYTHONMALLOC");
            if w.kind == Kind::PythonMalloc {
                cmd.env("PYTHONMALLOC", "malloc");
            }
            with_alloc(&mut cmd, a);
            outcome(run(&what, &mut cmd, None, &scratch))
        }
        Kind::Gcc => {
            let mut secs = 0.0;
            let mut cpu = 0.0;
            let mut rss = 0;
            let mut output = Vec::new();
            for (k, (include, unit)) in s.gcc_units.iter().enumerate() {
                let obj = scratch.join(format!("unit{k}.o"));
                let mut cmd = Command::new("gcc");
                cmd.args(["-O2", "-w", "-c", "-I"])
                    .arg(include)
                    .arg(unit)
                    .arg("-o")
                    .arg(&obj)
                    // mimalloc's sources print __DATE__ and __TIME__: fixed by this variable,
                    // so that objects can be compared byte for byte.
                    .env("SOURCE_DATE_EPOCH", "0")
                    .env("TMPDIR", &scratch);
                with_alloc(&mut cmd, a);
                let f = run(&what, &mut cmd, None, &scratch);
                secs += f.secs;
                cpu += f.cpu;
                rss = rss.max(f.maxrss);
                let bytes = std::fs::read(&obj)
                    .unwrap_or_else(|e| panic!("{what}: no object {}: {e}", obj.display()));
                assert!(!bytes.is_empty(), "{what}: empty object");
                output
                    .extend_from_slice(format!("{}:{}\n", unit.display(), bytes.len()).as_bytes());
                output.extend_from_slice(&bytes);
            }
            Outcome {
                figure: secs,
                cpu,
                rss,
                output,
                tests: Vec::new(),
            }
        }
        Kind::Larson => {
            let mut cmd = Command::new(&s.larson);
            // threads, rounds, replacements per round, objects per set
            cmd.args(["2", if s.quick { "20" } else { "100" }, "20000", "5000"]);
            with_alloc(&mut cmd, a);
            outcome(run(&what, &mut cmd, None, &scratch))
        }
    }
}

/// Builds `programs/larson.cpp` into `work`.
fn build_larson(work: &Path) -> PathBuf {
    let exe = work.join("larson");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/programs/larson.cpp");
    let out = Command::new("g++")
        .args(["-O2", "-std=c++17", "-pthread", "-o"])
        .arg(&exe)
        .arg(&source)
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap_or_else(|e| panic!("cannot run g++: {e}; {DEPS}"));
    assert!(
        out.status.success(),
        "g++ {}:\n{}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn outcome(f: Finished) -> Outcome {
    Outcome {
        figure: f.secs,
        cpu: f.cpu,
        rss: f.maxrss,
        output: f.stdout,
        tests: Vec::new(),
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("cannot find a free port on 127.0.0.1")
        .port()
}

fn redis_ping(port: u16) -> bool {
    let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 16];
    c.write_all(b"PING\r\n").is_ok()
        && c.read(&mut buf)
            .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
}

fn redis_cli(port: u16) -> Command {
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

fn redis(a: &Alloc, s: &Setup, scratch: &Path) -> Outcome {
    let port = free_port();
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
    let server = &mut server.0;
    let server_log = || {
        format!(
            "{}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default(),
            std::fs::read_to_string(scratch.join("server.err")).unwrap_or_default()
        )
    };
    let started = Instant::now();
    while !redis_ping(port) {
        if let Ok(Some(st)) = server.try_wait() {
            panic!(
                "redis-server under {} exited ({st}) before answering:\n{}",
                a.name,
                server_log()
            );
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = server.kill();
            panic!(
                "redis-server under {} did not answer PING in 20 s:\n{}",
                a.name,
                server_log()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    check_preload_errors("redis-server", server_log().as_bytes());
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
    // Every reply fine: the server counted no error reply.
    let mut info = redis_cli(port);
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
    let mut check = redis_cli(port);
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
    let mut info = redis_cli(port);
    info.args(["INFO", "stats"]);
    let f = run("redis-cli INFO stats", &mut info, None, scratch);
    assert!(
        String::from_utf8_lossy(&f.stdout).contains("total_error_replies:0"),
        "the check script got error replies from redis-server under {}:\n{}",
        a.name,
        tail(&output)
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.id()))
        .expect("cannot read the server's /proc status");
    let hwm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in /proc/{}/status", server.id()));
    let mut shutdown = redis_cli(port);
    shutdown.args(["SHUTDOWN", "NOSAVE"]);
    // redis-cli reports the connection the server closed; its exit status is not the server's.
    let _ = shutdown.output();
    let st = server.wait().expect("cannot wait for redis-server");
    assert!(
        st.success(),
        "redis-server under {} ended with {st}:\n{}",
        a.name,
        server_log()
    );
    let geo = (tests.iter().map(|t| t.1.ln()).sum::<f64>() / tests.len() as f64).exp();
    Outcome {
        figure: geo,
        cpu: 0.0,
        rss: hwm_kib * 1024,
        output,
        tests,
    }
}

// ------------------------------------------------------------------------------------------------
// Set-up: library, peers, programs, inputs, binding checks.

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // The bench binary lives in <target>/release/deps/.
            let exe = std::env::current_exe().unwrap();
            exe.ancestors()
                .nth(3)
                .map(PathBuf::from)
                .unwrap_or_else(|| "target".into())
        })
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `POOLALLOC_TEST_C_SO`, else `libpoolalloc_c.so` built in `target/capi-bench`; it must export the
/// C allocation functions.
fn library() -> PathBuf {
    let so = if let Some(p) = std::env::var_os("POOLALLOC_TEST_C_SO") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "POOLALLOC_TEST_C_SO={} is not a file",
            p.display()
        );
        p
    } else {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let target = target_dir().join("capi-bench");
        eprintln!("building libpoolalloc_c.so in {}", target.display());
        let st = Command::new(cargo)
            .current_dir(workspace())
            .args(["build", "--release", "-p", "poolalloc-c", "--target-dir"])
            .arg(&target)
            .status()
            .expect("cannot run cargo to build libpoolalloc_c.so");
        assert!(st.success(), "building libpoolalloc_c.so failed");
        target.join("release").join("libpoolalloc_c.so")
    };
    let so = so.canonicalize().unwrap();
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&so)
        .output()
        .expect("cannot run nm (install binutils)");
    let syms = String::from_utf8_lossy(&out.stdout);
    for f in ["malloc", "free", "calloc", "realloc"] {
        assert!(
            syms.lines().any(|l| l
                .split_whitespace()
                .last()
                .and_then(|sym| sym.split('@').next())
                == Some(f)),
            "{} does not export `{f}`: it cannot replace the C allocator",
            so.display()
        );
    }
    so
}

fn need_program(name: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false);
    assert!(found, "`{name}` is not installed: {DEPS}");
}

/// The real CPython 3 executable (not a version manager's shell-script shim, which the preload
/// would also measure).
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("POOLALLOC_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from("/usr/bin/python3");
    assert!(
        p.is_file(),
        "/usr/bin/python3 is missing: install Debian's python3 (apt-get install -y python3), or set \
         POOLALLOC_TEST_PYTHON to a CPython executable"
    );
    p
}

/// mimalloc's single-file builds in the cargo registry (`libmimalloc-sys`, a dependency of the
/// root package's benchmarks): (include directory, static.c) of its newest version, one per
/// mimalloc major version it ships.
fn gcc_units() -> Vec<(PathBuf, PathBuf)> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    let mut crates: Vec<PathBuf> = std::fs::read_dir(home.join("registry/src"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|index| {
            std::fs::read_dir(index.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libmimalloc-sys-"))
        })
        .collect();
    crates.sort_by_key(|p| {
        let n = p.file_name().unwrap().to_str().unwrap().to_string();
        let v: Vec<u64> = n["libmimalloc-sys-".len()..]
            .split(['.', '+', '-'])
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        v
    });
    let newest = crates.last().unwrap_or_else(|| {
        panic!(
            "no libmimalloc-sys sources in {}: run `cargo fetch` in the repository (the root \
             package's dev-dependency mimalloc brings them)",
            home.join("registry/src").display()
        )
    });
    let base = newest.join("c_src/mimalloc");
    let mut units = Vec::new();
    for dir in [base.join("v2"), base.join("v3"), base.clone()] {
        let unit = dir.join("src/static.c");
        if unit.is_file() && dir.join("include").is_dir() {
            units.push((dir.join("include"), unit));
        }
    }
    assert!(
        !units.is_empty(),
        "no src/static.c in {}: this libmimalloc-sys is laid out differently",
        base.display()
    );
    units
}

/// Runs each program once per allocator with `LD_DEBUG=bindings` and checks that `malloc` and
/// `free` bind to the intended library in every process that binds them.
fn check_bindings(w: &Workload, a: &Alloc, s: &Setup) {
    let dir = s.work.join(format!("bindings-{}-{}", w.name, a.name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = match w.kind {
        Kind::Redis => {
            let mut c = Command::new("redis-server");
            c.arg("--version");
            c
        }
        Kind::Sqlite => {
            let mut c = Command::new("sqlite3");
            c.args([
                ":memory:",
                "CREATE TABLE t(x); INSERT INTO t VALUES (1); SELECT * FROM t;",
            ]);
            c
        }
        Kind::Python | Kind::PythonMalloc => {
            let mut c = Command::new(&s.python);
            c.args(["-c", "import json; json.dumps(list(range(1000)))"]);
            if w.kind == Kind::PythonMalloc {
                c.env("PYTHONMALLOC", "malloc");
            }
            c
        }
        Kind::Larson => {
            let mut c = Command::new(&s.larson);
            c.args(["2", "2", "100", "100"]);
            c
        }
        Kind::Gcc => {
            // A small unit: the driver, cc1 and as all run, as in the measured compiles.
            let probe = dir.join("probe.c");
            std::fs::write(&probe, "int twice(int x) { return 2 * x; }\n").unwrap();
            let mut c = Command::new("gcc");
            c.args(["-O2", "-c"])
                .arg(&probe)
                .arg("-o")
                .arg(dir.join("probe.o"));
            c
        }
    };
    cmd.env("LD_DEBUG", "bindings")
        .env("LD_DEBUG_OUTPUT", dir.join("ld"))
        .env("TMPDIR", &dir);
    with_alloc(&mut cmd, a);
    let what = format!("{} under {} with LD_DEBUG=bindings", w.name, a.name);
    let scratch = dir.join("out");
    std::fs::create_dir_all(&scratch).unwrap();
    run(&what, &mut cmd, None, &scratch);
    let want = a.preload.file_name().unwrap().to_str().unwrap().to_string();
    let mut processes = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        if !e.file_name().to_str().unwrap().starts_with("ld.") {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap();
        let mut bound = [false; 2];
        for line in text.lines() {
            for (k, sym) in ["`malloc'", "`free'"].iter().enumerate() {
                if !line.contains(&format!("normal symbol {sym}")) {
                    continue;
                }
                let to = line
                    .split(" to ")
                    .nth(1)
                    .and_then(|t| t.split(" [").next())
                    .unwrap_or("");
                let file = Path::new(to)
                    .file_name()
                    .and_then(|f| f.to_str())
                    .unwrap_or("");
                // An executable that takes the function's address has a canonical PLT entry
                // that other objects bind to; that entry's own binding is checked on its line.
                let executable = !file.contains(".so");
                assert!(
                    file == want || executable,
                    "{what}: {sym} bound to {to}, not to {want}:\n{line}"
                );
                bound[k] |= file == want;
            }
        }
        if bound[0] && bound[1] {
            processes += 1;
        }
    }
    assert!(
        processes > 0,
        "{what}: no process bound malloc and free (see {})",
        dir.display()
    );
}

fn sh(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn first_line(s: String) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

fn environment(so: &Path) -> String {
    let model = sh("lscpu", &[])
        .lines()
        .find_map(|l| l.strip_prefix("Model name:").map(|m| m.trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or("?".into(), |k| {
            format!("{:.0} GiB", k as f64 / 1024.0 / 1024.0)
        });
    let pkg = |p: &str| {
        let v = sh("dpkg-query", &["-W", "-f=${Version}", p]);
        if v.is_empty() { "?".into() } else { v }
    };
    let poolalloc = if so.file_name().and_then(|f| f.to_str()) == Some("libpoolalloc_c.so") {
        format!(
            "`{}` (poolalloc-c, commit {})",
            so.display(),
            sh(
                "git",
                &[
                    "-C",
                    env!("CARGO_MANIFEST_DIR"),
                    "rev-parse",
                    "--short",
                    "HEAD"
                ]
            )
        )
    } else {
        format!(
            "**STAND-IN, NOT POOLALLOC**: `{}` (POOLALLOC_TEST_C_SO); the poolalloc column measures that library",
            so.display()
        )
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "- date: {}\n- machine: {model}, {cpus} CPUs, {mem}; Linux {}; {} (libc6 {})",
        sh("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        sh("uname", &["-r"]),
        sh("getconf", &["GNU_LIBC_VERSION"]),
        pkg("libc6")
    );
    let _ = writeln!(
        s,
        "- allocators: poolalloc {poolalloc}; glibc = `LD_PRELOAD` of `libc.so.6`; jemalloc = libjemalloc2 {} \
         (`{JEMALLOC}`); mimalloc = libmimalloc2.0 {} (`{MIMALLOC}`)",
        pkg("libjemalloc2"),
        pkg("libmimalloc2.0")
    );
    let _ = writeln!(
        s,
        "- programs: {}; sqlite3 {}; {}; {}",
        first_line(sh("redis-server", &["--version"])),
        first_line(sh("sqlite3", &["-version"]))
            .split(' ')
            .next()
            .unwrap_or(""),
        first_line(sh(python().to_str().unwrap(), &["--version"])),
        first_line(sh("gcc", &["--version"]))
    );
    s
}

// ------------------------------------------------------------------------------------------------
// Main, table, chart.

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn mib(b: f64) -> String {
    format!("{:.1}", b / 1048576.0)
}

struct Cell {
    figures: Vec<f64>,
    cpu: Vec<f64>,
    rss: Vec<f64>,
    tests: Vec<Vec<(String, f64)>>,
}

pub fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only: Option<&String> = args.iter().find(|a| !a.starts_with('-'));
    let rounds = if quick { 2 } else { 5 };

    for p in [
        "redis-server",
        "redis-benchmark",
        "redis-cli",
        "sqlite3",
        "gcc",
        "g++",
        "nm",
    ] {
        need_program(p);
    }
    for (peer, pkg) in [(JEMALLOC, "libjemalloc2"), (MIMALLOC, "libmimalloc2.0")] {
        assert!(
            Path::new(peer).is_file(),
            "{peer} is missing (Debian package {pkg}): {DEPS}"
        );
    }
    let libc_so = LIBC
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("no libc.so.6 in /lib/x86_64-linux-gnu or /usr/lib/x86_64-linux-gnu");
    let font = register_font();
    assert!(
        font,
        "no DejaVuSans.ttf for the chart (Debian package fonts-dejavu-core): {DEPS}"
    );
    let so = library();
    let allocs = [
        Alloc {
            name: NAMES[0],
            preload: so.clone(),
        },
        Alloc {
            name: NAMES[1],
            preload: libc_so,
        },
        Alloc {
            name: NAMES[2],
            preload: JEMALLOC.into(),
        },
        Alloc {
            name: NAMES[3],
            preload: MIMALLOC.into(),
        },
    ];

    let out = target_dir().join("poolalloc-report");
    let work = out.join("programs-work");
    std::fs::create_dir_all(&work).unwrap();
    let sql = work.join("bulk.sql");
    std::fs::write(&sql, sqlite_script(if quick { 20_000 } else { 200_000 })).unwrap();
    let py = work.join("workload.py");
    std::fs::write(&py, PYTHON_WORKLOAD).unwrap();
    let redis_check = work.join("redis-check.txt");
    std::fs::write(&redis_check, redis_check_script()).unwrap();
    let mut units = gcc_units();
    if quick {
        units.truncate(1);
    }
    let larson = build_larson(&work);
    let setup = Setup {
        quick,
        work,
        sql,
        py,
        python: python(),
        redis_check,
        gcc_units: units,
        larson,
    };
    let workloads: Vec<&Workload> = WORKLOADS
        .iter()
        .filter(|w| only.is_none_or(|o| w.name.contains(o.as_str())))
        .collect();
    assert!(!workloads.is_empty(), "no workload matches {only:?}");

    for w in &workloads {
        for a in &allocs {
            check_bindings(w, a, &setup);
        }
    }
    eprintln!("malloc and free bind to the intended library in every program");

    let mut cells: Vec<Vec<Cell>> = workloads
        .iter()
        .map(|_| {
            (0..allocs.len())
                .map(|_| Cell {
                    figures: Vec::new(),
                    cpu: Vec::new(),
                    rss: Vec::new(),
                    tests: Vec::new(),
                })
                .collect()
        })
        .collect();
    let mut reference: HashMap<&str, (usize, Vec<u8>)> = HashMap::new();
    let total = rounds * workloads.len() * allocs.len();
    let mut done = 0;
    let started = Instant::now();
    for round in 0..rounds {
        for (wi, w) in workloads.iter().enumerate() {
            for k in 0..allocs.len() {
                let ai = (k + round + wi) % allocs.len(); // rotate the order
                let a = &allocs[ai];
                let o = run_workload(w, a, &setup);
                match reference.get(w.name) {
                    None => {
                        reference.insert(w.name, (ai, o.output.clone()));
                    }
                    Some((ri, expected)) if *expected != o.output => {
                        let mine = out.join(format!("programs-mismatch-{}-{}.out", w.name, a.name));
                        let theirs = out.join(format!(
                            "programs-mismatch-{}-{}.reference",
                            w.name, allocs[*ri].name
                        ));
                        std::fs::write(&mine, &o.output).unwrap();
                        std::fs::write(&theirs, expected).unwrap();
                        panic!(
                            "{} behaves differently under {} than under {}: outputs in {} and {}",
                            w.name,
                            a.name,
                            allocs[*ri].name,
                            mine.display(),
                            theirs.display()
                        );
                    }
                    Some(_) => {}
                }
                done += 1;
                eprintln!(
                    "[{done}/{total} {:>5.0}s] round {} {:<14} {:<10} {:>12} {}  peak RSS {:>7} MiB",
                    started.elapsed().as_secs_f64(),
                    round + 1,
                    w.name,
                    a.name,
                    if w.kind == Kind::Redis {
                        format!("{:.0}", o.figure)
                    } else {
                        format!("{:.3}", o.figure)
                    },
                    if w.kind == Kind::Redis {
                        "req/s"
                    } else {
                        "s    "
                    },
                    mib(o.rss as f64)
                );
                let c = &mut cells[wi][ai];
                c.figures.push(o.figure);
                c.cpu.push(o.cpu);
                c.rss.push(o.rss as f64);
                c.tests.push(o.tests);
            }
        }
    }

    let report = table(&workloads, &cells, rounds, quick, &environment(&so));
    println!("{report}");
    std::fs::write(out.join("programs.md"), &report).unwrap();
    let png = out.join("programs.png");
    chart(&png, &workloads, &cells);
    eprintln!(
        "wrote {} and {}",
        out.join("programs.md").display(),
        png.display()
    );
}

/// (time ratio, RSS ratio) of poolalloc to the best of jemalloc and mimalloc; for redis the time
/// ratio is the time per request, best peer's requests/s over poolalloc's.
fn ratios(w: &Workload, c: &[Cell]) -> (f64, f64) {
    let f: Vec<f64> = c.iter().map(|c| median(c.figures.clone())).collect();
    let m: Vec<f64> = c.iter().map(|c| median(c.rss.clone())).collect();
    let t = if w.kind == Kind::Redis {
        f[2].max(f[3]) / f[0]
    } else {
        f[0] / f[2].min(f[3])
    };
    (t, m[0] / m[2].min(m[3]))
}

fn table(
    workloads: &[&Workload],
    cells: &[Vec<Cell>],
    rounds: usize,
    quick: bool,
    env: &str,
) -> String {
    let mut s = String::new();
    s += "# Real programs under each allocator\n\n";
    s += env;
    let _ = writeln!(
        s,
        "\n`cargo bench -p poolalloc-c --bench programs{}`: medians of {rounds} interleaved run(s) per cell{}. \
         Time in seconds (redis: requests per second, geometric mean over its tests), peak RSS in MiB \
         (redis: the server's VmHWM; others: wait4's ru_maxrss, child processes included). \
         Ratio = poolalloc / best of jemalloc and mimalloc, for redis best requests/s / poolalloc's \
         (below 1 is better). Every program printed the same output under every allocator.\n",
        if quick { " -- --quick" } else { "" },
        if quick {
            ", quick mode (small inputs)"
        } else {
            ""
        }
    );
    s += "| program | poolalloc | glibc | jemalloc | mimalloc | time ratio | poolalloc RSS | glibc RSS | jemalloc RSS | mimalloc RSS | RSS ratio |\n";
    s += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (wi, w) in workloads.iter().enumerate() {
        let c = &cells[wi];
        let f: Vec<f64> = c.iter().map(|c| median(c.figures.clone())).collect();
        let m: Vec<f64> = c.iter().map(|c| median(c.rss.clone())).collect();
        let (tr, mr) = ratios(w, c);
        let fig = |x: f64| {
            if w.kind == Kind::Redis {
                format!("{x:.0} req/s")
            } else {
                format!("{x:.3} s")
            }
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | **{tr:.2}** | {} | {} | {} | {} | **{mr:.2}** |",
            w.name,
            fig(f[0]),
            fig(f[1]),
            fig(f[2]),
            fig(f[3]),
            mib(m[0]),
            mib(m[1]),
            mib(m[2]),
            mib(m[3])
        );
    }
    let timed: Vec<usize> = (0..workloads.len())
        .filter(|&wi| workloads[wi].kind != Kind::Redis)
        .collect();
    if !timed.is_empty() {
        s += "\nCPU time (user + system seconds, child processes included; less disturbed than the wall \
              time by other work on the machine):\n\n";
        s += "| program | poolalloc | glibc | jemalloc | mimalloc | CPU ratio |\n|---|---:|---:|---:|---:|---:|\n";
        for wi in timed {
            let c: Vec<f64> = cells[wi].iter().map(|c| median(c.cpu.clone())).collect();
            let _ = writeln!(
                s,
                "| {} | {:.3} | {:.3} | {:.3} | {:.3} | **{:.2}** |",
                workloads[wi].name,
                c[0],
                c[1],
                c[2],
                c[3],
                c[0] / c[2].min(c[3])
            );
        }
    }
    if let Some(wi) = workloads.iter().position(|w| w.kind == Kind::Redis) {
        s += "\nredis-benchmark, requests per second per test (medians; value size, pipeline depth):\n\n";
        s += "| test | poolalloc | glibc | jemalloc | mimalloc | ratio |\n|---|---:|---:|---:|---:|---:|\n";
        let names: Vec<String> = cells[wi][0].tests[0].iter().map(|t| t.0.clone()).collect();
        for (ti, name) in names.iter().enumerate() {
            let v: Vec<f64> = cells[wi]
                .iter()
                .map(|c| {
                    median(
                        c.tests
                            .iter()
                            .map(|t| {
                                assert_eq!(&t[ti].0, name, "redis-benchmark changed its tests");
                                t[ti].1
                            })
                            .collect(),
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "| {name} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} |",
                v[0],
                v[1],
                v[2],
                v[3],
                v[2].max(v[3]) / v[0]
            );
        }
    }
    let (t, m): (Vec<f64>, Vec<f64>) = workloads
        .iter()
        .enumerate()
        .map(|(wi, w)| ratios(w, &cells[wi]))
        .unzip();
    let geo = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp();
    let _ = writeln!(
        s,
        "\nGeometric mean of the time ratios **{:.2}**, of the RSS ratios **{:.2}**; worst time ratio {:.2}, worst RSS ratio {:.2} (target: every ratio at most 1.00).",
        geo(&t),
        geo(&m),
        t.iter().cloned().fold(0.0, f64::max),
        m.iter().cloned().fold(0.0, f64::max)
    );
    s
}

fn register_font() -> bool {
    for path in [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
    ] {
        if let Ok(bytes) = std::fs::read(path) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font(
                "sans-serif",
                plotters::style::FontStyle::Normal,
                bytes,
            )
            .is_ok()
            {
                return true;
            }
        }
    }
    false
}

fn chart(png: &Path, workloads: &[&Workload], cells: &[Vec<Cell>]) {
    use plotters::prelude::*;
    let ratios: Vec<(f64, f64)> = workloads
        .iter()
        .enumerate()
        .map(|(wi, w)| ratios(w, &cells[wi]))
        .collect();
    let root = BitMapBackend::new(png, (900, 480)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let ymax = ratios
        .iter()
        .flat_map(|r| [r.0, r.1])
        .fold(1.2f64, f64::max)
        * 1.1;
    let n = workloads.len() as f64;
    let time_color = RGBColor(31, 119, 180);
    let rss_color = RGBColor(127, 127, 127);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Programs: poolalloc / best of jemalloc and mimalloc (below 1 is better)",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..n, 0f64..ymax)
        .unwrap();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("ratio")
        .draw()
        .unwrap();
    chart
        .draw_series(ratios.iter().enumerate().map(|(i, r)| {
            Rectangle::new(
                [(i as f64 + 0.12, 0.0), (i as f64 + 0.48, r.0)],
                time_color.filled(),
            )
        }))
        .unwrap()
        .label("time (redis: time per request)")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], time_color.filled()));
    chart
        .draw_series(ratios.iter().enumerate().map(|(i, r)| {
            Rectangle::new(
                [(i as f64 + 0.52, 0.0), (i as f64 + 0.88, r.1)],
                rss_color.filled(),
            )
        }))
        .unwrap()
        .label("peak RSS")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], rss_color.filled()));
    chart
        .draw_series(LineSeries::new(
            [(0.0, 1.0), (n, 1.0)],
            RGBColor(214, 39, 40).stroke_width(2),
        ))
        .unwrap();
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .unwrap();
    let style = ("sans-serif", 15).into_font().color(&BLACK);
    for (i, w) in workloads.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        let width = w.name.len() as i32 * 4;
        root.draw(&Text::new(
            w.name.to_string(),
            (x - width, y + 8),
            style.clone(),
        ))
        .unwrap();
    }
    root.present().unwrap();
}
