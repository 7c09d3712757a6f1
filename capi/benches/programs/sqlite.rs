//! `sqlite`: `sqlite3` on an in-memory database runs a generated script; its output must be the
//! same under every allocator.

use super::process::{run, tail, with_alloc};
use super::text::words;
use super::{Alloc, Outcome, Setup, outcome};
use crate::harness::rng::Rng;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// The tables (`inputs/schema.sql`), after `.bail on`.
const SCHEMA: &str = include_str!("../inputs/schema.sql");
/// What runs on the rows once inserted (`inputs/queries.sql`).
const QUERIES: &str = include_str!("../inputs/queries.sql");

/// The SQL script: `orders` rows with text payloads (one in 500 above 32 KiB), customers, indexes,
/// joins, group-bys, a window function, updates, deletes, a derived table, VACUUM, an integrity
/// check. Only aggregates are printed.
pub fn script(orders: usize) -> String {
    let mut r = Rng::new(0x5eed_0001);
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
    s += SCHEMA;
    s += "BEGIN;\n";
    for chunk in (1..=customers).collect::<Vec<_>>().chunks(200) {
        s += "INSERT INTO customers VALUES ";
        for (k, id) in chunk.iter().enumerate() {
            if k > 0 {
                s += ",";
            }
            let len = 6 + r.below(20);
            let name = words(&mut r, len);
            let city = cities[r.below(cities.len())];
            let len = r.below(120);
            let note = words(&mut r, len);
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
            let customer = 1 + r.below(customers);
            let amount = r.below(100_000);
            let status = statuses[r.below(statuses.len())];
            let len = if r.below(500) == 0 {
                33_000 + r.below(20_000)
            } else {
                16 + r.below(400)
            };
            let payload = words(&mut r, len);
            let _ = write!(s, "({id},{customer},{amount},'{status}','{payload}')");
        }
        s += ";\n";
    }
    s += "COMMIT;\n";
    s += QUERIES;
    s
}

/// One run: the script of `s.sql` on stdin; nothing may go to stderr.
pub fn measure(what: &str, a: &Alloc, s: &Setup, scratch: &Path) -> Outcome {
    let mut cmd = Command::new("sqlite3");
    cmd.arg(":memory:");
    with_alloc(&mut cmd, a);
    let f = run(what, &mut cmd, Some(&s.sql), scratch);
    assert!(
        f.stderr.is_empty(),
        "{what} wrote to stderr:\n{}",
        tail(&f.stderr)
    );
    outcome(f)
}

/// The bindings check's command: a table made and read.
pub fn probe() -> Command {
    let mut c = Command::new("sqlite3");
    c.args([
        ":memory:",
        "CREATE TABLE t(x); INSERT INTO t VALUES (1); SELECT * FROM t;",
    ]);
    c
}
