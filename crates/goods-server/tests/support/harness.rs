//! What the fault and fleet tests share: the real binary with short healing bounds, a client
//! that buys and reads like a buyer and a seller, and the end-state check of a sale.

use futures::future::join_all;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub use super::process;

pub const LEASE_MS: u64 = 2500;
pub const HEAL_MS: u64 = 250;
pub const SELLER: i64 = 900_000;
/// The JWT secret every harness server has: clients identify with signed tokens, which pass a
/// balancer that strips identity headers.
pub const JWT_SECRET: &str = "hjwt_4Rk9sV2xM7pQ1nT8cZ5bL3wF6hJ0gYdE";
/// How long healing may take after a fault: a reservation's lease, two passes, and slack for
/// a loaded machine.
pub const HEAL_WITHIN: Duration = Duration::from_millis(LEASE_MS + 2 * HEAL_MS + 3000);

/// A `goods-server` process.
pub struct Server {
    pub child: Child,
    pub base: String,
    pub env: Vec<(String, String)>,
}

/// The seal key of draw seeds every test server has (`DRAW_SEAL_KEY`).
pub const SEAL_KEY: &str = "b58mmOaSgG+I3CS2IrkGV9Q+TbEiohIYGaN4YDGOA5A=";

impl Server {
    pub fn start(env: &[(&str, &str)]) -> Self {
        let mut vars: Vec<(String, String)> = vec![
            ("BIND_ADDR".into(), "127.0.0.1:0".into()),
            ("AUTH_MODE".into(), "jwt".into()),
            ("AUTH_JWT_SECRET".into(), JWT_SECRET.into()),
            ("DATABASE_MIGRATE".into(), "true".into()),
            ("DATABASE_POOL_SIZE".into(), "16".into()),
            ("HTTP_WORKERS".into(), "2".into()),
            ("DB_WRITE_WAIT_MS".into(), "500".into()),
            ("DB_ACQUIRE_TIMEOUT_MS".into(), "500".into()),
            ("DB_TX_TIMEOUT_MS".into(), "1000".into()),
            ("RESERVATION_LEASE_MS".into(), LEASE_MS.to_string()),
            ("RECONCILE_INTERVAL_MS".into(), HEAL_MS.to_string()),
            ("RUST_LOG".into(), "warn,goods_server=info".into()),
            ("DRAW_SEAL_KEY".into(), SEAL_KEY.into()),
            // No webhook rounds (statements every 250 ms, which the tests that count a
            // request's statements would see): a test that delivers webhooks sets its own.
            ("WEBHOOK_POLL_MS".into(), "0".into()),
        ];
        for (k, v) in env {
            vars.retain(|(name, _)| name != k);
            vars.push(((*k).into(), (*v).into()));
        }
        let (child, base) = Self::spawn(&vars);
        Self {
            child,
            base,
            env: vars,
        }
    }

    fn spawn(vars: &[(String, String)]) -> (Child, String) {
        process::spawn(
            &std::env::temp_dir(),
            vars.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        )
    }

    /// SIGKILL: no graceful shutdown, requests in flight are cut.
    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, then waits for the process to exit: its exit code and how long it took.
    pub fn terminate(&mut self) -> (Option<i32>, Duration) {
        let sent = Instant::now();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -TERM failed");
        let code = self.child.wait().unwrap().code();
        (code, sent.elapsed())
    }

    /// Starts it again with the same configuration (a new port).
    pub fn restart(&mut self) {
        let (child, base) = Self::spawn(&self.env);
        self.child = child;
        self.base = base;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `Bearer <JWT>` for `user` in `role`, signed with [`JWT_SECRET`], valid for an hour.
pub fn bearer(user: i64, role: &str) -> String {
    let claims = json!({
        "sub": user.to_string(),
        "role": role,
        "exp": OffsetDateTime::now_utc().unix_timestamp() + 3600,
    });
    api_actix::install_jwt_crypto();
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .unwrap();
    format!("Bearer {token}")
}

/// `req` as `user` in `role`, both ways a server may take it: a signed token (JWT mode, the
/// harness's default) and the gateway's headers (trusted-header mode, the embedded default);
/// each mode ignores the other's.
pub fn as_user(req: reqwest::RequestBuilder, user: i64, role: &str) -> reqwest::RequestBuilder {
    req.header("Authorization", bearer(user, role))
        .header("X-User-Id", user.to_string())
        .header("X-User-Role", role)
}

/// A purchase that got no answer to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No answer within the client's timeout (15 s).
    Hang,
    /// The connection failed or was cut.
    Transport(String),
    /// An answer whose body is not JSON (a balancer's error page), with its status.
    NotJson(u16),
}

impl Failure {
    fn of(error: reqwest::Error) -> Self {
        if error.is_timeout() {
            Self::Hang
        } else {
            Self::Transport(error.to_string())
        }
    }
}

/// One purchase's answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub code: Option<String>,
    pub order: Option<i64>,
}

impl Answer {
    pub fn is(&self, code: &str) -> bool {
        self.code.as_deref() == Some(code)
    }
}

#[derive(Clone)]
pub struct Client {
    pub http: reqwest::Client,
    /// A drop in sizes: buyer `u` buys `sizes[u % sizes.len()]`.
    sizes: Option<Arc<[String]>>,
}

impl Client {
    pub fn new() -> Self {
        Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(15))
                .build()
                .unwrap(),
            sizes: None,
        }
    }

    /// This client for a drop in `skus`: buyer `u` buys `skus[u % skus.len()]`.
    #[allow(dead_code)] // not every test binary sells sizes
    pub fn in_sizes(&self, skus: &[&str]) -> Self {
        Self {
            http: self.http.clone(),
            sizes: Some(skus.iter().map(|s| (*s).to_owned()).collect()),
        }
    }

    /// The size buyer `user` buys (`None`: a drop without sizes).
    pub fn size_of(&self, user: i64) -> Option<&str> {
        let sizes = self.sizes.as_ref()?;
        let at = usize::try_from(user).unwrap_or(0) % sizes.len();
        Some(sizes[at].as_str())
    }

    /// A product in `sizes` (sku, units: its stock and the drop's units of it) and a drop of
    /// them, one unit per buyer, open since a second ago.
    #[allow(dead_code)] // not every test binary sells sizes
    pub async fn open_sized_drop(&self, base: &str, sizes: &[(&str, i64)]) -> i64 {
        let variants: Vec<Value> = sizes
            .iter()
            .map(|(sku, n)| json!({"sku": sku, "label": sku, "stockQuantity": n}))
            .collect();
        let product = self
            .seller_post(
                base,
                "/products",
                json!({"name": "Sneaker", "variants": variants}),
            )
            .await;
        let now = OffsetDateTime::now_utc();
        let at = |t: OffsetDateTime| t.format(&Rfc3339).unwrap();
        let units: Vec<Value> = sizes
            .iter()
            .map(|(sku, n)| json!({"sku": sku, "limitedQuantity": n}))
            .collect();
        let drop = self
            .seller_post(
                base,
                "/limited-drops",
                json!({
                    "productId": product["productId"],
                    "openAt": at(now - time::Duration::seconds(1)),
                    "closeAt": at(now + time::Duration::hours(1)),
                    "variants": units,
                    "perUserLimit": 1,
                }),
            )
            .await;
        drop["dropId"].as_i64().unwrap()
    }

    pub fn as_seller(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        as_user(req, SELLER, "seller")
    }

    /// A product and a drop of `limited` units, one per buyer, open since a second ago.
    pub async fn open_drop(&self, base: &str, limited: i64) -> i64 {
        let product = self
            .seller_post(
                base,
                "/products",
                json!({"name": "Sneaker", "stockQuantity": limited}),
            )
            .await;
        let now = OffsetDateTime::now_utc();
        let at = |t: OffsetDateTime| t.format(&Rfc3339).unwrap();
        let drop = self
            .seller_post(
                base,
                "/limited-drops",
                json!({
                    "productId": product["productId"],
                    "openAt": at(now - time::Duration::seconds(1)),
                    "closeAt": at(now + time::Duration::hours(1)),
                    "limitedQuantity": limited,
                    "perUserLimit": 1,
                }),
            )
            .await;
        drop["dropId"].as_i64().unwrap()
    }

    /// A draw drop of `limited` units on a product with `stock`, open since a second ago, its
    /// entries closing `entries_for` from now.
    pub async fn open_draw(
        &self,
        base: &str,
        stock: i64,
        limited: i64,
        entries_for: time::Duration,
    ) -> Value {
        let product = self
            .seller_post(
                base,
                "/products",
                json!({"name": "Sneaker", "stockQuantity": stock}),
            )
            .await;
        let now = OffsetDateTime::now_utc();
        let at = |t: OffsetDateTime| t.format(&Rfc3339).unwrap();
        self.seller_post(
            base,
            "/limited-drops",
            json!({
                "productId": product["productId"],
                "openAt": at(now - time::Duration::seconds(1)),
                "closeAt": at(now + time::Duration::hours(1)),
                "limitedQuantity": limited,
                "mode": "DRAW",
                "entryCloseAt": at(now + entries_for),
            }),
        )
        .await
    }

    /// `body` posted to `path` as the seller; the answer's body.
    pub async fn seller_post(&self, base: &str, path: &str, body: Value) -> Value {
        self.as_seller(self.http.post(format!("{base}{path}")))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// A purchase: the answer, or how it failed without one. A hang (no answer within the
    /// client's 15 s) and a transport error are outcomes of their own, which [`wave`] refuses
    /// and a test that cuts connections on purpose has to expect by name.
    pub async fn buy(&self, base: &str, drop: i64, user: i64) -> Result<Answer, Failure> {
        let res = as_user(
            self.http
                .post(format!("{base}/limited-drops/{drop}/orders")),
            user,
            "buyer",
        )
        .header("Idempotency-Key", format!("key-{user}"))
        .json(&match self.size_of(user) {
            Some(sku) => json!({"quantity": 1, "sku": sku}),
            None => json!({"quantity": 1}),
        })
        .send()
        .await
        .map_err(Failure::of)?;
        let status = res.status().as_u16();
        let body: Value = res.json().await.map_err(|e| match Failure::of(e) {
            Failure::Transport(_) => Failure::NotJson(status),
            other => other,
        })?;
        Ok(Answer {
            status,
            code: body["code"].as_str().map(str::to_owned),
            order: body["orderId"].as_i64(),
        })
    }

    pub async fn seller_json(&self, base: &str, path: &str) -> Value {
        self.as_seller(self.http.get(format!("{base}{path}")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Every event of `drop` in `/admin/events`, oldest first (all pages).
    pub async fn events(&self, base: &str, drop: i64) -> Vec<Value> {
        let mut events = Vec::new();
        let mut after = String::new();
        loop {
            let page: Value = as_user(
                self.http.get(format!(
                    "{base}/admin/events?dropId={drop}&limit=100{after}"
                )),
                99,
                "admin",
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
            events.extend(page["items"].as_array().unwrap().iter().cloned());
            match page["nextCursor"].as_str() {
                Some(cursor) => after = format!("&after={cursor}"),
                None => return events,
            }
        }
    }

    pub async fn reconciliation(&self, base: &str, drop: i64) -> Value {
        self.seller_json(base, &format!("/limited-drops/{drop}/reconciliation"))
            .await
    }

    /// Polls reconciliation until the gate holds exactly what the database did not sell
    /// (drift 0); how long that took.
    pub async fn until_healed(&self, base: &str, drop: i64, within: Duration) -> Duration {
        let start = Instant::now();
        loop {
            let recon = self.reconciliation(base, drop).await;
            if recon["drift"] == json!(0) {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < within,
                "not healed within {within:?}: {recon}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn order_exists(&self, base: &str, user: i64, order: i64) -> bool {
        as_user(
            self.http.get(format!("{base}/orders/{order}")),
            user,
            "buyer",
        )
        .send()
        .await
        .unwrap()
        .status()
            == 200
    }

    pub async fn db_statements(&self, base: &str) -> u64 {
        process::metric(&self.http, base, "db_statements_total").await
    }
}

/// Every buyer's latest answer, by buyer.
pub type Answers = HashMap<i64, Answer>;

/// `buyers` buy at once; their answers. A hang or a transport error fails the test: a wave
/// is sent to a server that is up (a test that kills one mid-flight uses [`Client::buy`] and
/// expects the failures it causes by name).
pub async fn wave(
    client: &Client,
    base: &str,
    drop: i64,
    buyers: impl Iterator<Item = i64>,
) -> Answers {
    let tries = buyers.map(|user| {
        let (client, base) = (client.clone(), base.to_owned());
        tokio::spawn(async move { (user, client.buy(&base, drop, user).await) })
    });
    join_all(tries)
        .await
        .into_iter()
        .map(|r| {
            let (user, outcome) = r.unwrap();
            let answer = outcome.unwrap_or_else(|failure| {
                panic!("buyer {user}: {failure:?}, where every purchase must be answered")
            });
            (user, answer)
        })
        .collect()
}

/// What [`sell_out_in_waves`] saw.
pub struct Sale {
    /// Every buyer's latest answer, the earlier ones included.
    pub answers: Answers,
    /// From the first wave until the drop was sold out.
    pub sold_out_after: Duration,
    /// From the first wave until the start of the first wave that got a 202.
    pub resumed_after: Duration,
    /// The longest wave: no purchase of it took longer.
    pub slowest_wave: Duration,
    /// Answers 503 (any code) among the waves' purchases.
    pub unavailable: usize,
}

/// Buyers from `next` on buy in waves of 40, [`HEAL_MS`] apart, until the drop has sold `limited`
/// units (reconciliation's `soldQuantity`), their answers added to `answers`. A 500 or a
/// purchase left unanswered fails the test, and so does a drop not sold out within `within`.
pub async fn sell_out_in_waves(
    client: &Client,
    base: &str,
    drop: i64,
    limited: i64,
    mut next: i64,
    answers: Answers,
    within: Duration,
) -> Sale {
    let start = Instant::now();
    let mut sale = Sale {
        answers,
        sold_out_after: Duration::ZERO,
        resumed_after: Duration::MAX,
        slowest_wave: Duration::ZERO,
        unavailable: 0,
    };
    loop {
        assert!(
            start.elapsed() < within,
            "the drop did not sell out within {within:?}"
        );
        let sent = Instant::now();
        let got = wave(client, base, drop, next..next + 40).await;
        sale.slowest_wave = sale.slowest_wave.max(sent.elapsed());
        next += 40;
        assert!(got.values().all(|a| a.status != 500), "{got:?}");
        if got.values().any(|a| a.status == 202) {
            sale.resumed_after = sale.resumed_after.min(sent - start);
        }
        sale.unavailable += got.values().filter(|a| a.status == 503).count();
        sale.answers.extend(got);
        let recon = client.reconciliation(base, drop).await;
        if recon["soldQuantity"] == json!(limited) {
            sale.sold_out_after = start.elapsed();
            return sale;
        }
        tokio::time::sleep(Duration::from_millis(HEAL_MS)).await;
    }
}

/// Whether `answer` tells the buyer to send the same purchase again, with the same key: still
/// in progress, or the service could not say (503, 429). A 503 can hide an order that did
/// commit (the database's answer was lost with its connection); the key replays it.
pub fn retry_later(answer: &Answer) -> bool {
    answer.is("IDEMPOTENCY_KEY_IN_PROGRESS")
        || answer.is("SERVICE_UNAVAILABLE")
        || answer.is("THROTTLED")
}

/// Every buyer of `answers` told to retry ([`retry_later`]) sends its purchase again, with its
/// key, [`HEAL_MS`] apart, until each has a definitive answer (within `within`; never a 500):
/// `answers` with those answers in place.
#[allow(dead_code)] // not every test binary has buyers to settle
pub async fn settle(
    client: &Client,
    base: &str,
    drop: i64,
    mut answers: Answers,
    within: Duration,
) -> Answers {
    let start = Instant::now();
    loop {
        let pending: Vec<i64> = answers
            .iter()
            .filter(|(_, a)| retry_later(a))
            .map(|(user, _)| *user)
            .collect();
        if pending.is_empty() {
            return answers;
        }
        assert!(
            start.elapsed() < within,
            "{} buyers still told to retry after {within:?}",
            pending.len()
        );
        let got = wave(client, base, drop, pending.into_iter()).await;
        assert!(got.values().all(|a| a.status != 500), "{got:?}");
        answers.extend(got);
        tokio::time::sleep(Duration::from_millis(HEAL_MS)).await;
    }
}

/// Asserts the end state of a sale of `limited` units: the database sold exactly `limited`,
/// the buyers hold exactly that many distinct 202s, every one of them is an order that exists,
/// and the gate agrees (nothing left, drift 0).
pub async fn assert_sold_out_exactly(
    client: &Client,
    base: &str,
    drop: i64,
    limited: i64,
    answers: &Answers,
) {
    let winners: Vec<(i64, i64)> = answers
        .iter()
        .filter(|(_, a)| a.status == 202)
        .map(|(user, a)| (*user, a.order.unwrap()))
        .collect();
    let recon = client.reconciliation(base, drop).await;
    assert_eq!(recon["soldQuantity"], json!(limited), "{recon}");
    assert_eq!(recon["oversold"], json!(false));
    assert_eq!(
        (recon["gateRemaining"].clone(), recon["drift"].clone()),
        (json!(0), json!(0)),
        "{recon}"
    );
    assert_eq!(
        i64::try_from(winners.len()).unwrap(),
        limited,
        "the buyers' 202s are exactly the units sold"
    );
    for (user, order) in winners {
        assert!(
            client.order_exists(base, user, order).await,
            "order {order} of buyer {user}"
        );
    }
}

/// [`assert_sold_out_exactly`] size by size: each of `sizes` (sku, units) sold exactly its units
/// (reconciliation), none oversold, the gate holding none of it (drift 0), and the buyers'
/// 202s of each size (`client`'s [`Client::size_of`]) exactly its units.
#[allow(dead_code)] // not every test binary sells sizes
pub async fn assert_each_size_sold_out_exactly(
    client: &Client,
    base: &str,
    drop: i64,
    sizes: &[(&str, i64)],
    answers: &Answers,
) {
    let limited: i64 = sizes.iter().map(|(_, n)| n).sum();
    assert_sold_out_exactly(client, base, drop, limited, answers).await;
    let recon = client.reconciliation(base, drop).await;
    let expected: Vec<Value> = sizes
        .iter()
        .map(|(sku, n)| {
            json!({"sku": sku, "limitedQuantity": n, "soldQuantity": n, "pendingQuantity": n,
                   "paidQuantity": 0, "cancelledQuantity": 0, "expiredQuantity": 0,
                   "gateRemaining": 0, "drift": 0, "oversold": false})
        })
        .collect();
    assert_eq!(recon["variants"], json!(expected), "{recon}");
    for (sku, n) in sizes {
        let won = answers
            .iter()
            .filter(|(user, a)| a.status == 202 && client.size_of(**user) == Some(*sku))
            .count();
        assert_eq!(i64::try_from(won).unwrap(), *n, "202s of {sku}");
    }
}

pub fn shared_redis(prefix: &str) -> [(&'static str, String); 3] {
    [
        ("GATE", "redis".into()),
        ("REDIS_URL", test_support::redis::server_url()),
        ("REDIS_KEY_PREFIX", prefix.to_owned()),
    ]
}

pub fn fresh_prefix() -> String {
    format!("faults:{}:", uuid::Uuid::new_v4().simple())
}

pub fn env<'a>(pairs: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    pairs.iter().map(|(k, v)| (*k, v.as_str())).collect()
}
