//! A typed test client around a real server (zero-to-production's `spawn_app`).
//!
//! `E2E_GATE=redis` also needs `E2E_REDIS_URL`; each test then uses its own key prefix.

use diesel_async::{AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection};
use goods_domain::ports::Clock as _;
use goods_server::{Application, Config};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use test_support::clock::ManualClock;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The seller every helper acts as.
pub const SELLER: i64 = 900_000;

/// The seal key of draw seeds every test server on MySQL has (`DRAW_SEAL_KEY`).
pub const SEAL_KEY: &str = "b58mmOaSgG+I3CS2IrkGV9Q+TbEiohIYGaN4YDGOA5A=";

/// The payment provider's signing secret every test server has (`PAYMENT_WEBHOOK_SECRET`).
pub const WEBHOOK_SECRET: &str = "whsec_9Vq3xT7mK2pL8nR4cW6yB1fH5jD0gZsA3eU7iO2kQ9tX";

/// Which source of truth this run uses.
#[derive(Clone)]
pub enum Backend {
    /// A SQLite file in a private directory.
    Sqlite(PathBuf),
    /// A private database on a MySQL/MariaDB server.
    Mysql { url: String },
}

impl Backend {
    /// A copy of the whole database as an operator's backup would have it: the SQLite file
    /// and its write-ahead log, or `mariadb-dump` of the MySQL database.
    pub async fn dump(&self) -> Vec<u8> {
        match self {
            Backend::Sqlite(path) => {
                let mut bytes = std::fs::read(path).unwrap();
                let wal = path.with_extension("db-wal");
                bytes.extend(std::fs::read(wal).unwrap_or_default());
                bytes
            }
            Backend::Mysql { url } => {
                let rest = url.trim_start_matches("mysql://");
                let (auth, rest) = rest.split_once('@').unwrap_or(("root", rest));
                let (hostport, db) = rest.split_once('/').unwrap();
                let (host, port) = hostport.split_once(':').unwrap_or((hostport, "3306"));
                let user = auth.split(':').next().unwrap();
                let out = std::process::Command::new("mariadb-dump")
                    .args(["-h", host, "-P", port, "-u", user, "--hex-blob", db])
                    .output()
                    .expect("mariadb-dump (Debian's mariadb-client) runs");
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                out.stdout
            }
        }
    }

    /// One number the database answers to `sql` (a column named `n`), read past every
    /// server's cache.
    pub async fn number(&self, sql: &str) -> i64 {
        #[derive(diesel::QueryableByName)]
        struct N {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        self.one::<N>(sql).await.n
    }

    /// One text the database answers to `sql` (a column named `t`).
    pub async fn text(&self, sql: &str) -> String {
        #[derive(diesel::QueryableByName)]
        struct T {
            #[diesel(sql_type = diesel::sql_types::Text)]
            t: String,
        }
        self.one::<T>(sql).await.t
    }

    /// The seed of a draw not revealed yet, opened as an insider holding the seal key would:
    /// the test's own key (MySQL), or the embedded mode's key file beside the database.
    pub async fn open_seed(&self, drop: i64) -> goods_domain::DrawSeed {
        use goods_domain::ports::SeedVault as _;
        let vault = match self {
            Backend::Sqlite(path) => {
                adapters_memory::SealingVault::with_key_file(path.with_file_name("draw-seal.key"))
            }
            Backend::Mysql { .. } => adapters_memory::SealingVault::with_keys(
                adapters_memory::parse_seal_key(SEAL_KEY).unwrap(),
                Vec::new(),
            ),
        };
        let row =
            |column: &str| format!("SELECT {column} AS t FROM drop_draws WHERE drop_id = {drop}");
        let sealed = goods_domain::SealedSeed {
            key_id: self.text(&row("seal_key_id")).await,
            sealed: hex::decode(self.text(&row("sealed_seed")).await).unwrap(),
        };
        let commitment =
            goods_domain::DrawCommitment::from_hex(&self.text(&row("commitment")).await).unwrap();
        vault
            .open(
                goods_domain::DropId::parse(drop).unwrap(),
                &sealed,
                &commitment,
            )
            .unwrap()
    }

    async fn one<
        R: diesel::QueryableByName<diesel::sqlite::Sqlite>
            + diesel::QueryableByName<diesel::mysql::Mysql>
            + Send
            + 'static,
    >(
        &self,
        sql: &str,
    ) -> R {
        match self {
            Backend::Sqlite(path) => {
                use diesel::{Connection as _, RunQueryDsl as _};
                let mut conn = diesel::SqliteConnection::establish(path.to_str().unwrap()).unwrap();
                diesel::sql_query(sql).get_result::<R>(&mut conn).unwrap()
            }
            Backend::Mysql { url } => {
                use diesel_async::RunQueryDsl as _;
                let mut conn = AsyncMysqlConnection::establish(url).await.unwrap();
                diesel::sql_query(sql)
                    .get_result::<R>(&mut conn)
                    .await
                    .unwrap()
            }
        }
    }

    /// Runs `sql` on the database behind every server's back (a test planting a row).
    pub async fn exec(&self, sql: &str) {
        match self {
            Backend::Sqlite(path) => {
                use diesel::Connection as _;
                use diesel::connection::SimpleConnection as _;
                diesel::SqliteConnection::establish(path.to_str().unwrap())
                    .unwrap()
                    .batch_execute(sql)
                    .unwrap();
            }
            Backend::Mysql { url } => {
                AsyncMysqlConnection::establish(url)
                    .await
                    .unwrap()
                    .batch_execute(sql)
                    .await
                    .unwrap();
            }
        }
    }

    /// SQL for the text of one byte `b` followed by `rest`, in this backend's dialect.
    pub fn byte_then(&self, b: u8, rest: &str) -> String {
        match self {
            Backend::Sqlite(_) => format!("(char({b}) || '{rest}')"),
            Backend::Mysql { .. } => format!("CONCAT(CHAR({b}), '{rest}')"),
        }
    }

    /// A fresh, empty backend.
    pub async fn fresh(dir: &tempfile::TempDir) -> Self {
        match std::env::var("E2E_DATABASE_URL")
            .ok()
            .filter(|u| !u.is_empty())
        {
            None => Backend::Sqlite(dir.path().join("goods.db")),
            Some(server) => {
                assert!(
                    server.starts_with("mysql://"),
                    "E2E_DATABASE_URL must be a mysql:// server URL without a database name"
                );
                let name = test_support::mysql::database_name("e2e");
                let mut conn = AsyncMysqlConnection::establish(&server)
                    .await
                    .unwrap_or_else(|e| panic!("E2E_DATABASE_URL={server} is unreachable: {e}"));
                conn.batch_execute(&format!("CREATE DATABASE {name}"))
                    .await
                    .unwrap();
                Backend::Mysql {
                    url: format!("{}/{name}", server.trim_end_matches('/')),
                }
            }
        }
    }

    /// The `DATABASE_URL` for it.
    pub fn url(&self) -> String {
        match self {
            Backend::Sqlite(path) => format!("sqlite://{}", path.display()),
            Backend::Mysql { url } => url.clone(),
        }
    }
}

/// Whether this run has an admission gate in front of the database.
pub fn gate_on() -> bool {
    gate() != "off"
}

fn gate() -> String {
    std::env::var("E2E_GATE").unwrap_or_else(|_| "memory".into())
}

/// A running server and a client for it.
pub struct TestApp {
    /// `http://127.0.0.1:port`.
    pub address: String,
    /// The ops listener, `http://127.0.0.1:port`: `/metrics` and the probes.
    pub ops: String,
    /// The HTTP client.
    pub client: reqwest::Client,
    /// The backend, to restart on it.
    pub backend: Backend,
    /// The server's clock: tests move it instead of sleeping (shared by siblings).
    pub clock: Arc<ManualClock>,
    pub handle: actix_web::dev::ServerHandle,
    dir: tempfile::TempDir,
    vars: Vec<(String, String)>,
}

impl TestApp {
    /// A server on a fresh backend with the default test configuration.
    pub async fn spawn() -> Self {
        Self::spawn_with(&[]).await
    }

    /// A server on a fresh backend with extra environment variables.
    pub async fn spawn_with(vars: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let backend = Backend::fresh(&dir).await;
        let mut vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        // A test that names its own Redis keeps it; otherwise E2E_GATE=redis gives it one.
        if gate() == "redis" && !vars.iter().any(|(k, _)| k == "REDIS_URL") {
            let url = std::env::var("E2E_REDIS_URL")
                .expect("E2E_GATE=redis needs E2E_REDIS_URL (e.g. redis://127.0.0.1:6379)");
            vars.push(("REDIS_URL".into(), url));
            // Every test gets its own keys; a restart keeps them, as a redeploy would.
            let prefix = format!("e2e:{}:", uuid::Uuid::new_v4().simple());
            vars.push(("REDIS_KEY_PREFIX".into(), prefix));
        }
        Self::start(dir, backend, vars, Arc::new(ManualClock::now_utc())).await
    }

    async fn start(
        dir: tempfile::TempDir,
        backend: Backend,
        vars: Vec<(String, String)>,
        clock: Arc<ManualClock>,
    ) -> Self {
        let mut env: HashMap<String, String> = HashMap::from([
            ("BIND_ADDR".into(), "127.0.0.1:0".into()),
            ("OPS_BIND_ADDR".into(), "127.0.0.1:0".into()),
            ("PAYMENT_WEBHOOK_SECRET".into(), WEBHOOK_SECRET.into()),
            ("DATABASE_URL".into(), backend.url()),
            ("GATE".into(), gate()),
            ("HTTP_WORKERS".into(), "2".into()),
            ("DATABASE_POOL_SIZE".into(), "8".into()),
            ("DB_WRITE_PERMITS".into(), "8".into()),
            ("RECONCILE_INTERVAL_MS".into(), "0".into()),
            // No webhook rounds (statements every few hundred milliseconds) but in the tests
            // that deliver webhooks (api::webhooks).
            ("WEBHOOK_POLL_MS".into(), "0".into()),
            // These tests send many requests as one buyer or from one address: the rate
            // limits' own tests (api::rate) turn them on.
            ("RATE_LIMIT_PER_BUYER".into(), "off".into()),
            ("RATE_LIMIT_PER_IP".into(), "off".into()),
            // Explicit: only the embedded mode defaults to it.
            ("AUTH_MODE".into(), "trusted-header".into()),
            // Each test's fresh MySQL database is migrated by its server (a fleet would run
            // `goods-server migrate` once instead; MySQL's default is not to migrate).
            ("DATABASE_MIGRATE".into(), "true".into()),
        ]);
        // The embedded mode (SQLite) keeps its own seal key beside its database; the others
        // are given one, as production must be.
        if backend.url().starts_with("mysql") {
            env.insert("DRAW_SEAL_KEY".into(), SEAL_KEY.into());
        }
        env.extend(vars.iter().cloned());
        let config =
            Config::from_lookup(|name| env.get(name).cloned().filter(|v| !v.is_empty())).unwrap();
        let app = Application::build_with_clock(config, clock.clone())
            .await
            .unwrap();
        let address = format!("http://{}", app.address());
        let ops = format!("http://{}", app.ops_address());
        let handle = app.handle();
        tokio::spawn(app.run_until_stopped());
        Self {
            address,
            ops,
            client: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .unwrap(),
            backend,
            clock,
            handle,
            dir,
            vars,
        }
    }

    /// Two instances sharing the database and a Redis gate on the shared test Redis (its own
    /// keys), with `vars` on both: a fleet of two, in every mode.
    pub async fn pair_on_shared_redis(vars: &[(&str, &str)]) -> (Self, Self) {
        let url = test_support::redis::server_url();
        let prefix = test_support::redis::fresh_prefix();
        let mut all = vec![
            ("GATE", "redis"),
            ("REDIS_URL", url.as_str()),
            ("REDIS_KEY_PREFIX", prefix.as_str()),
        ];
        all.extend_from_slice(vars);
        let a = Self::spawn_with(&all).await;
        let b = a.sibling().await;
        (a, b)
    }

    /// A second instance on the same database (and the same Redis keys when the gate is
    /// Redis), as a fleet behind a load balancer would run.
    pub async fn sibling(&self) -> Self {
        Self::start(
            tempfile::tempdir().unwrap(),
            self.backend.clone(),
            self.vars.clone(),
            self.clock.clone(),
        )
        .await
    }

    /// Stops this server gracefully and starts a new one on the same data.
    pub async fn restart(self) -> Self {
        self.handle.stop(true).await;
        Self::start(self.dir, self.backend, self.vars, self.clock).await
    }

    /// A request with identity headers for `user` (`None`: anonymous).
    pub fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        user: Option<(i64, &str)>,
    ) -> reqwest::RequestBuilder {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.address));
        if let Some((id, role)) = user {
            req = req
                .header("X-User-Id", id.to_string())
                .header("X-User-Role", role);
        }
        req
    }

    /// GET as `user`.
    pub async fn get(&self, path: &str, user: Option<(i64, &str)>) -> Response {
        self.request(reqwest::Method::GET, path, user)
            .send()
            .await
            .unwrap()
    }

    /// Creates a product as the seller; returns its id.
    pub async fn create_product(&self, stock: i64) -> i64 {
        let res = self
            .request(reqwest::Method::POST, "/products", Some((SELLER, "seller")))
            .json(&json!({"name": "Limited sneaker", "stockQuantity": stock}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        body(res).await["productId"].as_i64().unwrap()
    }

    /// POST /limited-drops as the seller.
    pub async fn post_drop(&self, body: &Value) -> Response {
        self.request(
            reqwest::Method::POST,
            "/limited-drops",
            Some((SELLER, "seller")),
        )
        .json(body)
        .send()
        .await
        .unwrap()
    }

    /// A drop on a new product with `stock`, open from `open_in` to `close_in` from now.
    pub async fn drop_with(
        &self,
        stock: i64,
        limited: i64,
        per_user: i64,
        open_in: time::Duration,
        close_in: time::Duration,
    ) -> (i64, i64) {
        let product = self.create_product(stock).await;
        let now = self.clock.now();
        let res = self
            .post_drop(&json!({
                "productId": product,
                "openAt": at(now + open_in),
                "closeAt": at(now + close_in),
                "limitedQuantity": limited,
                "perUserLimit": per_user,
            }))
            .await;
        assert_eq!(res.status(), StatusCode::CREATED);
        (product, body(res).await["dropId"].as_i64().unwrap())
    }

    /// An open drop (opened a second ago, closing in an hour) on a product of `stock`.
    pub async fn open_drop(&self, stock: i64, limited: i64, per_user: i64) -> (i64, i64) {
        self.drop_with(
            stock,
            limited,
            per_user,
            time::Duration::seconds(-1),
            time::Duration::hours(1),
        )
        .await
    }

    /// POST /limited-drops/{drop}/orders as buyer `user` with `key`.
    pub async fn purchase(&self, drop: i64, user: i64, key: &str, quantity: i64) -> Response {
        self.request(
            reqwest::Method::POST,
            &format!("/limited-drops/{drop}/orders"),
            Some((user, "buyer")),
        )
        .header("Idempotency-Key", key)
        .json(&json!({ "quantity": quantity }))
        .send()
        .await
        .unwrap()
    }

    /// A purchase retried with the same key as a client does while the answer says to come
    /// back: a 503 (a store past its bound on a loaded machine), or a 409
    /// `IDEMPOTENCY_KEY_IN_PROGRESS` (the 503's attempt still holds its lease). At most 30 s;
    /// the final answer's status and body. The order is placed once whatever the tries.
    pub async fn purchase_until_final(
        &self,
        drop: i64,
        user: i64,
        key: &str,
        quantity: i64,
    ) -> (StatusCode, Value) {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let res = self.purchase(drop, user, key, quantity).await;
            let status = res.status();
            let body: Value = res.json().await.unwrap_or(Value::Null);
            let again = status == StatusCode::SERVICE_UNAVAILABLE
                || body["code"] == "IDEMPOTENCY_KEY_IN_PROGRESS";
            if !again || std::time::Instant::now() > until {
                return (status, body);
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// Starts a purchase without waiting for it (to catch it in flight).
    pub fn purchase_in_background(
        &self,
        drop: i64,
        user: i64,
        key: &str,
    ) -> tokio::task::JoinHandle<Response> {
        let request = self
            .request(
                reqwest::Method::POST,
                &format!("/limited-drops/{drop}/orders"),
                Some((user, "buyer")),
            )
            .header("Idempotency-Key", key)
            .json(&json!({ "quantity": 1 }));
        tokio::spawn(async move { request.send().await.unwrap() })
    }

    /// GET as the seller, expecting 200; the JSON body.
    pub async fn seller_json(&self, path: &str) -> Value {
        let res = self.get(path, Some((SELLER, "seller"))).await;
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        body(res).await
    }

    /// POST /orders/{order}/cancel as buyer `user`.
    pub async fn cancel(&self, order: &Value, user: i64) -> Response {
        self.request(
            reqwest::Method::POST,
            &format!("/orders/{}/cancel", order["orderId"]),
            Some((user, "buyer")),
        )
        .send()
        .await
        .unwrap()
    }

    /// The product's stock.
    pub async fn stock(&self, product: i64) -> i64 {
        self.seller_json(&format!("/products/{product}")).await["stockQuantity"]
            .as_i64()
            .unwrap()
    }

    /// The drop's `remaining`.
    pub async fn remaining(&self, drop: i64) -> i64 {
        body(self.get(&format!("/limited-drops/{drop}"), None).await).await["remaining"]
            .as_i64()
            .unwrap()
    }

    /// Polls `/health/ready` until `wanted` holds for its status and body: a readiness answer
    /// is reused for up to `READY_CACHE` (1 s), so a change shows within that and one check.
    pub async fn until_ready(&self, wanted: impl Fn(StatusCode, &Value) -> bool) -> Value {
        let start = std::time::Instant::now();
        loop {
            let res = self.get("/health/ready", None).await;
            let status = res.status();
            let answer = body(res).await;
            if wanted(status, &answer) {
                return answer;
            }
            assert!(
                start.elapsed() < api_actix::READY_CACHE + Duration::from_secs(1),
                "/health/ready still answers {status} {answer}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The ops listener's `/metrics` page.
    pub async fn metrics(&self) -> String {
        let res = self
            .client
            .get(format!("{}/metrics", self.ops))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        res.text().await.unwrap()
    }

    /// `db_statements_total` from `/metrics`.
    pub async fn db_statements(&self) -> u64 {
        let text = self.metrics().await;
        series_value(&text, "db_statements_total").expect("db_statements_total in /metrics") as u64
    }

    /// `db_statements_total` once the server has gone quiet (two reads 100 ms apart agree, at
    /// most 3 s): the start-up work (the first drop and flag refresh runs as the server starts)
    /// lands before a measurement instead of inside it.
    ///
    /// The periodic drop refresh (every `DROP_REFRESH_MS`, 500 ms by default) costs statements
    /// of its own at any moment, and would land inside a measurement now and then (CI once saw
    /// 3 more than a refusal sends): a test that counts statements spawns its server with
    /// `DROP_REFRESH_MS` of a minute or more, and this refuses to measure otherwise.
    pub async fn db_statements_settled(&self) -> u64 {
        let refresh = self
            .vars
            .iter()
            .find(|(name, _)| name == "DROP_REFRESH_MS")
            .and_then(|(_, ms)| ms.parse::<u64>().ok());
        assert!(
            refresh.is_some_and(|ms| ms >= 60_000),
            "counting statements needs the periodic drop refresh out of the way: spawn with \
             DROP_REFRESH_MS of 60000 or more (it is {refresh:?})"
        );
        let mut last = self.db_statements().await;
        for _ in 0..30 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let now = self.db_statements().await;
            if now == last {
                return now;
            }
            last = now;
        }
        panic!("the server kept sending database statements for 3 s with no request ({last})");
    }

    /// The payment provider, sending signed events to this server.
    pub fn provider(&self) -> Provider {
        Provider {
            client: self.client.clone(),
            address: self.address.clone(),
            clock: Arc::clone(&self.clock),
        }
    }

    /// The provider's `payment.succeeded` event `event_id` for `order` (an order view), for
    /// its amount, by `reference`.
    pub async fn pay(&self, order: &Value, event_id: &str, reference: &str) -> Response {
        self.provider().pay(order, event_id, reference).await
    }

    /// Polls `/metrics` until the buffer has exactly `free` write slots left (purchases hold
    /// the others).
    pub async fn until_write_slots_available(&self, free: usize) {
        let line = format!("db_write_slots_available {free}");
        for _ in 0..500 {
            let text = self.metrics().await;
            if text.lines().any(|l| l == line) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("write slots never came down to {free} within 5 s");
    }

    /// Polls until a purchase is in flight: admitted by the gate (remaining went down to
    /// `remaining_once_admitted`) or, with no gate, holding the write slot.
    pub async fn until_in_flight(&self, drop: i64, remaining_once_admitted: i64) {
        if gate_on() {
            self.until_remaining(drop, remaining_once_admitted).await;
        } else {
            // The test server's buffer has DB_WRITE_PERMITS = 8 slots.
            self.until_write_slots_available(7).await;
        }
    }

    /// Polls until the drop's remaining units are `expected`.
    pub async fn until_remaining(&self, drop: i64, expected: i64) {
        for _ in 0..500 {
            if self.remaining(drop).await == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("remaining never became {expected}");
    }

    /// Holds the database's write lock for the drop (SQLite: the whole file; MySQL: the drop
    /// row) until the returned guard's `release`, so a purchase can be caught mid-flight.
    pub async fn lock_drop(&self, drop: i64) -> DbLock {
        DbLock::take(&self.backend, drop).await
    }
}

/// The payment provider of a [`TestApp`]: signs its events with [`WEBHOOK_SECRET`] at the
/// server's clock.
#[derive(Clone)]
pub struct Provider {
    client: reqwest::Client,
    address: String,
    clock: Arc<ManualClock>,
}

impl Provider {
    /// POST /payments/events with `event`, signed.
    pub async fn send(&self, event: &Value) -> Response {
        let body = serde_json::to_vec(event).unwrap();
        let signature = api_actix::signature::sign(
            WEBHOOK_SECRET.as_bytes(),
            self.clock.now().unix_timestamp(),
            &body,
        );
        self.client
            .post(format!("{}/payments/events", self.address))
            .header("Content-Type", "application/json")
            .header("Payment-Signature", signature)
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// The `payment.succeeded` event `event_id` for `order` (an order view), for its amount,
    /// by `reference`.
    pub async fn pay(&self, order: &Value, event_id: &str, reference: &str) -> Response {
        self.send(&json!({
            "eventId": event_id,
            "type": "payment.succeeded",
            "orderId": order["orderId"],
            "amountMinor": order["amountMinor"],
            "currency": order["currency"],
            "paymentReference": reference,
        }))
        .await
    }
}

/// A held database lock; see [`TestApp::lock_drop`].
pub struct DbLock {
    release: tokio::sync::oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
}

impl DbLock {
    async fn take(backend: &Backend, drop: i64) -> Self {
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        let (locked, is_locked) = tokio::sync::oneshot::channel::<()>();
        let done = match backend.clone() {
            Backend::Sqlite(path) => tokio::task::spawn_blocking(move || {
                use diesel::Connection;
                use diesel::connection::SimpleConnection;
                let mut conn = diesel::SqliteConnection::establish(path.to_str().unwrap()).unwrap();
                conn.batch_execute("BEGIN EXCLUSIVE").unwrap();
                locked.send(()).unwrap();
                let _ = wait.blocking_recv();
                conn.batch_execute("COMMIT").unwrap();
            }),
            Backend::Mysql { url } => tokio::spawn(async move {
                let mut conn = AsyncMysqlConnection::establish(&url).await.unwrap();
                conn.batch_execute(&format!(
                    "BEGIN; SELECT id FROM limited_drops WHERE id = {drop} FOR UPDATE;"
                ))
                .await
                .unwrap();
                locked.send(()).unwrap();
                let _ = wait.await;
                conn.batch_execute("COMMIT").await.unwrap();
            }),
        };
        is_locked.await.unwrap();
        Self { release, done }
    }

    /// Releases the lock.
    pub async fn release(self) {
        let _ = self.release.send(());
        self.done.await.unwrap();
    }
}

/// The value of one series in a Prometheus exposition (`name{labels}` exactly as rendered, or
/// a bare name), if present.
pub fn series_value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// An instant as the API writes it.
pub fn at(when: OffsetDateTime) -> String {
    when.format(&Rfc3339).unwrap()
}

/// The JSON body.
pub async fn body(res: Response) -> Value {
    res.json().await.unwrap()
}

/// Asserts a problem+json answer with `status` and `code`; returns the body.
pub async fn problem(res: Response, status: u16, code: &str) -> Value {
    assert_eq!(res.status().as_u16(), status, "expected {status} {code}");
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "application/problem+json"
    );
    let body = body(res).await;
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["status"], status);
    assert!(body["type"].is_string() && body["title"].is_string() && body["detail"].is_string());
    body
}
