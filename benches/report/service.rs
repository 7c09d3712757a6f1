//! http-service: a JSON service over HTTP/1.1, `hyper` on `tokio`, on loopback. The server answers
//! POSTed orders: it reads the body, parses it with `serde_json` into a `Value`, builds a response
//! object (totals, the item count, the upper-cased SKUs, the tags back) and serialises it. A
//! client in the same process opens 48 keep-alive connections, each sending a fixed number of
//! orders one after the other and timing each request; the server accepts exactly those 48
//! connections, and each connection ends when its client hangs up, so the run stops by itself.
//! The heap is what such a service's is: per request the connection's buffers, the header map,
//! the body's `Bytes`, a `Value` tree of small strings and maps, the serialised response, and the
//! tasks' futures, freed on whichever worker thread polls them next.
//!
//! Server and client share one multi-thread runtime of `p.threads` workers: on a machine of few
//! cores a second pool of client threads would only contend for the same cores, and the client's
//! allocations (building and parsing JSON) are the allocator's work as much as the server's.

use super::{Extra, Params, Rng};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};
use std::net::SocketAddr;
use std::time::Instant;
use tokio::net::{TcpListener, TcpStream};

const CONNECTIONS: usize = 48;

/// The server's answer to one order.
async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let body = req.into_body().collect().await?.to_bytes();
    let order: Value = serde_json::from_slice(&body).expect("the client sends JSON");
    let items = order["items"].as_array().expect("an order has items");
    let mut total = 0;
    let mut skus = Vec::with_capacity(items.len());
    for it in items {
        total += it["qty"].as_i64().unwrap() * it["price_cents"].as_i64().unwrap();
        skus.push(Value::String(it["sku"].as_str().unwrap().to_uppercase()));
    }
    let mut out = Map::new();
    out.insert("id".into(), order["id"].clone());
    out.insert("customer".into(), order["customer"].clone());
    out.insert("total_cents".into(), total.into());
    out.insert("item_count".into(), items.len().into());
    out.insert("skus".into(), Value::Array(skus));
    out.insert("tags".into(), order["tags"].clone());
    out.insert("received_bytes".into(), body.len().into());
    let out = serde_json::to_vec(&Value::Object(out)).unwrap();
    Ok(Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(out)))
        .unwrap())
}

/// Serves one accepted connection until its client hangs up.
async fn serve(stream: TcpStream) {
    stream.set_nodelay(true).unwrap();
    hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), hyper::service::service_fn(handle))
        .await
        .expect("server connection");
}

/// A random order of 1 to 16 items and its total.
fn order(r: &mut Rng, id: u64) -> (Value, i64) {
    let mut total = 0;
    let items: Vec<Value> = (0..r.range(1, 16))
        .map(|_| {
            let (qty, price) = (r.range(1, 9) as i64, r.range(50, 99_999) as i64);
            total += qty * price;
            json!({ "sku": format!("sku-{:x}", r.next() >> 40), "qty": qty, "price_cents": price })
        })
        .collect();
    let tags: Vec<Value> = (0..r.below(5))
        .map(|i| Value::String(format!("tag{i}-{}", "x".repeat(r.below(24)))))
        .collect();
    let note = "n".repeat(r.below(400));
    let order = json!({
        "id": id,
        "customer": { "name": format!("customer {}", r.below(100_000)), "tier": r.below(3) },
        "items": items,
        "tags": tags,
        "note": note,
    });
    (order, total)
}

/// One client connection: `n` orders, one after the other; the latency of each in microseconds.
async fn client(addr: SocketAddr, conn: usize, n: usize) -> Vec<u32> {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).unwrap();
    let (mut sender, driver) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    let driver = tokio::spawn(driver);
    let mut r = Rng::new(conn as u64 + 1);
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let id = (conn * n + i) as u64;
        let (doc, total) = order(&mut r, id);
        let req = Request::post("/orders")
            .header("host", addr.to_string())
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(serde_json::to_vec(&doc).unwrap())))
            .unwrap();
        let t = Instant::now();
        let res = sender.send_request(req).await.expect("request");
        assert!(res.status().is_success(), "status {}", res.status());
        let body = res.into_body().collect().await.expect("body").to_bytes();
        lat.push(t.elapsed().as_micros() as u32);
        // A server that answered another order, or computed it wrong, fails here.
        let back: Value = serde_json::from_slice(&body).expect("the server sends JSON");
        assert_eq!(back["id"].as_u64(), Some(id), "answer to another order");
        assert_eq!(back["total_cents"].as_i64(), Some(total), "total");
    }
    // Hanging up ends the connection on both sides.
    drop(sender);
    driver.await.unwrap().expect("client connection");
    lat
}

pub(super) fn http_service(p: Params) -> Extra {
    let per_conn = 250 * p.scale;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(p.threads.max(1))
        .enable_io()
        .build()
        .unwrap();
    let (secs, mut lat) = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let mut conns = Vec::with_capacity(CONNECTIONS);
            for _ in 0..CONNECTIONS {
                let (stream, _) = listener.accept().await.expect("accept");
                conns.push(tokio::spawn(serve(stream)));
            }
            for c in conns {
                c.await.unwrap();
            }
        });
        let t = Instant::now();
        let clients: Vec<_> = (0..CONNECTIONS)
            .map(|c| tokio::spawn(client(addr, c, per_conn)))
            .collect();
        let mut lat = Vec::with_capacity(CONNECTIONS * per_conn);
        for c in clients {
            lat.extend(c.await.unwrap());
        }
        let secs = t.elapsed().as_secs_f64();
        server.await.unwrap();
        (secs, lat)
    });
    drop(rt);
    assert_eq!(lat.len(), CONNECTIONS * per_conn, "every request answered");
    lat.sort_unstable();
    let p99 = lat[(lat.len() * 99).div_ceil(100) - 1];
    Extra {
        p99_us: Some(p99 as f64),
        ops_per_sec: Some(lat.len() as f64 / secs),
        ..Extra::default()
    }
}

/// The service for the soak (`soak.rs`): the same server and clients on one runtime until `until`.
/// Each of the 48 clients sends `250 * p.scale` orders on a connection, hangs up and connects
/// again, as a service's clients come and go; the server accepts for as long as they come, and
/// stops when the runtime is dropped. No latencies are kept: a list that grows for hours would be
/// the soak's own drift.
pub(super) fn http_service_until(p: Params, until: Instant) {
    let per_conn = 250 * p.scale;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(p.threads.max(1))
        .enable_io()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.expect("accept");
                tokio::spawn(serve(stream));
            }
        });
        let clients: Vec<_> = (0..CONNECTIONS)
            .map(|c| {
                tokio::spawn(async move {
                    // Connection `c` of round `k` seeds its orders with `c + k * CONNECTIONS`.
                    let mut seed = c;
                    while Instant::now() < until {
                        let lat = client(addr, seed, per_conn).await;
                        assert_eq!(lat.len(), per_conn, "every request answered");
                        seed += CONNECTIONS;
                    }
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
    });
}
