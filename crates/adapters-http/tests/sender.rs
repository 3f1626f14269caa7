//! [`HttpSender`] against real receivers on loopback: plain HTTP/1.1 servers written here, so
//! each test sees the bytes that arrived.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test fixtures panic on purpose

use adapters_http::HttpSender;
use goods_domain::ports::{WebhookRequest, WebhookSender};
use goods_domain::webhook::AttemptOutcome;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A receiver answering every request with `answer` (a whole HTTP response), or never when
/// `None`; what arrived, request by request.
async fn receiver(answer: Option<&'static str>) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    receiver_then(answer, false).await
}

/// [`receiver`], keeping the connection open without a byte more after the answer when
/// `hang`.
async fn receiver_then(
    answer: Option<&'static str>,
    hang: bool,
) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let record = Arc::clone(&record);
            tokio::spawn(async move {
                let mut bytes = Vec::new();
                let mut buf = [0_u8; 4096];
                loop {
                    let n = socket.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    bytes.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&bytes).to_string();
                    if let Some(head_end) = text.find("\r\n\r\n") {
                        let length = text[..head_end]
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length: "))
                            .and_then(|n| n.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if bytes.len() >= head_end + 4 + length {
                            record.lock().unwrap().push(text);
                            break;
                        }
                    }
                }
                match answer {
                    Some(answer) => {
                        let _ = socket.write_all(answer.as_bytes()).await;
                        if hang {
                            tokio::time::sleep(Duration::from_secs(60)).await;
                        }
                    }
                    None => tokio::time::sleep(Duration::from_secs(60)).await,
                }
            });
        }
    });
    (address, seen)
}

fn request(url: String, address: SocketAddr) -> WebhookRequest {
    WebhookRequest {
        url,
        address,
        id: "drop-1-1".into(),
        timestamp: 1_700_000_000,
        signature: "v1,abc=".into(),
        body: r#"{"id":"drop-1-1"}"#.into(),
    }
}

#[tokio::test]
async fn a_request_carries_the_signed_headers_and_the_body_to_the_checked_address() {
    let (address, seen) =
        receiver(Some("HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")).await;
    // The name resolves nowhere: only the address given is connected to.
    let url = format!("http://receiver.invalid:{}/hooks", address.port());
    let outcome = HttpSender::new(Duration::from_secs(5))
        .send(&request(url, address))
        .await;
    assert_eq!(outcome, AttemptOutcome::Answered(204));
    let seen = seen.lock().unwrap();
    let text = &seen[0];
    assert!(text.starts_with("POST /hooks HTTP/1.1\r\n"), "{text}");
    for header in [
        "content-type: application/json",
        "webhook-id: drop-1-1",
        "webhook-timestamp: 1700000000",
        "webhook-signature: v1,abc=",
        &format!("host: receiver.invalid:{}", address.port()),
    ] {
        assert!(
            text.contains(&format!("{header}\r\n")),
            "{header} in {text}"
        );
    }
    assert!(text.ends_with("\r\n\r\n{\"id\":\"drop-1-1\"}"), "{text}");
}

#[tokio::test]
async fn a_redirect_is_an_answer_and_is_not_followed() {
    let (target, followed) = receiver(Some("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")).await;
    let redirect: &'static str = Box::leak(
        format!(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{target}/inside\r\ncontent-length: 0\r\n\r\n"
        )
        .into_boxed_str(),
    );
    let (address, _) = receiver(Some(redirect)).await;
    let outcome = HttpSender::new(Duration::from_secs(5))
        .send(&request(format!("http://{address}/hooks"), address))
        .await;
    assert_eq!(outcome, AttemptOutcome::Answered(307));
    assert!(
        followed.lock().unwrap().is_empty(),
        "the redirect was followed"
    );
}

#[tokio::test]
async fn a_receiver_that_hangs_is_given_up_on_at_the_timeout() {
    let (address, _) = receiver(None).await;
    let started = Instant::now();
    let outcome = HttpSender::new(Duration::from_millis(300))
        .send(&request(format!("http://{address}/hooks"), address))
        .await;
    let AttemptOutcome::NoAnswer(why) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(why.starts_with("timed out"), "{why}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn nothing_listening_is_no_answer() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let outcome = HttpSender::new(Duration::from_secs(5))
        .send(&request(format!("http://{address}/hooks"), address))
        .await;
    assert!(
        matches!(&outcome, AttemptOutcome::NoAnswer(why) if why.starts_with("could not connect")),
        "{outcome:?}"
    );
}

/// An answer whose body goes on (here: 2 KiB of a promised MiB, then nothing) is not waited
/// for past its first KiB: the status is the outcome, long before the timeout.
#[tokio::test]
async fn an_answer_is_read_no_further_than_a_kibibyte() {
    let body: &'static str = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{}",
            1 << 20,
            "x".repeat(2048)
        )
        .into_boxed_str(),
    );
    let (address, _) = receiver_then(Some(body), true).await;
    let started = Instant::now();
    let outcome = HttpSender::new(Duration::from_secs(20))
        .send(&request(format!("http://{address}/hooks"), address))
        .await;
    assert_eq!(outcome, AttemptOutcome::Answered(200));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "waited for the rest of the body: {:?}",
        started.elapsed()
    );
}
