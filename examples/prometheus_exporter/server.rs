//! The exporter's server: answers `GET /metrics` on a listener with `poolalloc::stats()` in the
//! Prometheus text exposition format, anything else with 404. One connection at a time, closed
//! after each answer (`Connection: close`): a scrape every few seconds needs no more. Shared by
//! the example (`main.rs`) and the test that scrapes it (`tests/prometheus_exporter.rs`).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::Duration;

/// Serves scrapes on `listener` until `stop()` is true after a connection (or accepting fails).
pub fn serve(listener: &TcpListener, stop: impl Fn() -> bool) -> io::Result<()> {
    for conn in listener.incoming() {
        // A client that hangs up early costs its own answer only.
        let _ = answer(conn?);
        if stop() {
            break;
        }
    }
    Ok(())
}

/// Reads one request and writes its answer.
fn answer(conn: TcpStream) -> io::Result<()> {
    let mut reader = BufReader::new(&conn);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // Skip the headers: nothing in them changes the answer.
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let mut parts = request.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, kind, body) = if method == "GET" && (path == "/metrics" || path == "/") {
        (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            poolalloc::stats().prometheus().to_string(),
        )
    } else {
        (
            "404 Not Found",
            "text/plain",
            "not found: try /metrics\n".to_string(),
        )
    };
    // One write for the whole answer (a write per piece would send a segment each).
    let answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut out = &conn;
    out.write_all(answer.as_bytes())?;
    out.flush()?;
    // Close gracefully: end our side, then read what the client may still send until it closes
    // (closing with unread bytes would make the kernel reset the connection, and the client could
    // lose the answer).
    conn.shutdown(Shutdown::Write)?;
    conn.set_read_timeout(Some(Duration::from_secs(1)))?;
    let mut sink = [0u8; 512];
    while matches!((&conn).read(&mut sink), Ok(n) if n > 0) {}
    Ok(())
}
