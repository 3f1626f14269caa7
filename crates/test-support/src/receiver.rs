//! A webhook receiver for the tests: plain HTTP/1.1 on loopback, keeping every request it
//! answered (its headers, lower-cased, and body), answering 204, after `delay`, or 500 to the
//! first `failures` requests of each `webhook-id` (a receiver that is down for a while).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request the receiver answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Each header once, by its lower-cased name.
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// How the receiver answers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Behaviour {
    /// How long it takes to answer each request.
    pub delay: Duration,
    /// How many requests of each `webhook-id` it answers 500 before 204.
    pub failures: usize,
}

/// What a receiver answered, in order.
pub type Received = Arc<Mutex<Vec<Request>>>;

/// Starts a receiver; its address and what it answered.
pub async fn start(behaviour: Behaviour) -> (SocketAddr, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let received: Received = Arc::default();
    let record = Arc::clone(&received);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let record = Arc::clone(&record);
            tokio::spawn(async move {
                let mut bytes = Vec::new();
                let mut buf = [0_u8; 8192];
                loop {
                    let n = socket.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    bytes.extend_from_slice(&buf[..n]);
                    let Some(request) = parse(&bytes) else {
                        continue;
                    };
                    bytes.clear();
                    tokio::time::sleep(behaviour.delay).await;
                    let id = request.header("webhook-id").map(str::to_owned);
                    let fail = {
                        let got = record.lock().unwrap();
                        got.iter()
                            .filter(|r| r.header("webhook-id").map(str::to_owned) == id)
                            .count()
                            < behaviour.failures
                    };
                    let answer: &[u8] = if fail {
                        b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n"
                    } else {
                        b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n"
                    };
                    if socket.write_all(answer).await.is_ok() {
                        record.lock().unwrap().push(request);
                    }
                }
            });
        }
    });
    (address, received)
}

/// The request in `bytes`, once all of it (head and `content-length` of body) has come.
fn parse(bytes: &[u8]) -> Option<Request> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&bytes[..end]);
    let headers: BTreeMap<String, String> = head
        .lines()
        .skip(1)
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        })
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let body = bytes.get(end + 4..end + 4 + length)?;
    Some(Request {
        headers,
        body: String::from_utf8_lossy(body).into_owned(),
    })
}

/// Waits until `received` holds `n` requests, at most `within`.
pub async fn until_received(received: &Received, n: usize, within: Duration) {
    let deadline = std::time::Instant::now() + within;
    while received.lock().unwrap().len() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {n} requests within {within:?}",
            received.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
