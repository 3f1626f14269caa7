//! The connection: a pool for commands, a subscriber for restock messages.

use anyhow::Context as _;
use fred::clients::SubscriberClient;
use fred::prelude::*;
use fred::types::config::{Config as FredConfig, ReconnectPolicy, TlsConnector};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How to reach Redis.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// `redis://host:port/db`.
    pub url: String,
    /// Prefix of every key and channel (one per deployment, or per test).
    pub prefix: String,
    pub pool_size: usize,
    /// How long one command may take before its outcome is treated as unknown.
    pub command_timeout: Duration,
    /// PEM CA to verify a `rediss://` server with, instead of the system's roots
    /// (`REDIS_TLS_CA_FILE`).
    pub tls_ca_file: Option<std::path::PathBuf>,
}

/// Numbers the connections a process opens, so a runtime's own clients are kept per pool.
static OPENED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A client a current-thread runtime opened for itself (see [`RedisConnection::client`]).
struct OwnClient {
    pool: u64,
    runtime: tokio::runtime::Id,
    client: Client,
}

thread_local! {
    static OWN: std::cell::RefCell<Vec<OwnClient>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A connected pool and subscriber.
#[derive(Clone)]
pub struct RedisConnection {
    /// This connection's number among those the process opened (see [`RedisConnection::client`]).
    id: u64,
    pub(crate) pool: Pool,
    pub(crate) subscriber: SubscriberClient,
    pub(crate) prefix: String,
    /// Prefix of a drop's keys: `prefix`, then the identity of the database the drops belong
    /// to once [`mirroring`](Self::mirroring) named it.
    pub(crate) drops: String,
    pub(crate) tasks: Tasks,
}

/// The connection's background tasks (subscriptions, the counters' flush, sold-out snapshots),
/// on the runtime it was opened on, tracked so [`RedisConnection::close`] can stop and wait for
/// them.
#[derive(Clone)]
pub(crate) struct Tasks {
    tracker: TaskTracker,
    pub(crate) stop: CancellationToken,
    runtime: Option<tokio::runtime::Handle>,
}

impl Tasks {
    fn new() -> Self {
        Self {
            tracker: TaskTracker::new(),
            stop: CancellationToken::new(),
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    /// Runs `task` in the background until it ends or the connection closes.
    pub(crate) fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let stop = self.stop.clone();
        let task = async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = task => {}
            }
        };
        match &self.runtime {
            Some(runtime) => drop(self.tracker.spawn_on(task, runtime)),
            None => drop(self.tracker.spawn(task)),
        }
    }

    /// Runs `task` to its end, even past [`RedisConnection::close`]'s stop (a final flush).
    pub(crate) fn spawn_to_end(
        &self,
        task: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        match &self.runtime {
            Some(runtime) => drop(self.tracker.spawn_on(task, runtime)),
            None => drop(self.tracker.spawn(task)),
        }
    }
}

impl RedisConnection {
    /// Builds the clients and waits up to `wait` for the first connection; past it they keep
    /// reconnecting and every call fails fast (the application falls back to the database).
    /// `rediss://` is TLS only, verified against `tls_ca_file` or the system's roots, never
    /// falling back to plaintext.
    ///
    /// # Errors
    /// An invalid URL or CA file, or a failed TLS handshake.
    pub async fn connect(config: &RedisConfig, wait: Duration) -> anyhow::Result<Self> {
        let mut fred_config = FredConfig::from_url(&config.url).context("REDIS_URL")?;
        let tls = match (&fred_config.tls, &config.tls_ca_file) {
            (Some(_), ca) => Some(Arc::new(tls_client(ca.as_deref())?)),
            (None, Some(_)) => anyhow::bail!(
                "REDIS_TLS_CA_FILE is set but REDIS_URL is not rediss://: refusing to connect in plaintext"
            ),
            (None, None) => None,
        };
        if let Some(client) = &tls {
            fred_config.tls = Some(TlsConnector::from((**client).clone()).into());
            // A server that answers but fails the handshake is misconfigured (or not the
            // server meant), which waiting will not cure: the start fails, naming it. One that
            // does not answer at all is down: the gate starts degraded, as without TLS.
            if let Some(server) = fred_config.server.hosts().into_iter().next() {
                handshake(&server.host, server.port, Arc::clone(client))
                    .await
                    .map_err(|reason| {
                        anyhow::anyhow!(
                            "REDIS_URL {}: the TLS handshake with Redis failed ({reason}); rediss:// never falls back to plaintext: check that the server speaks TLS on this port and that its certificate verifies against {}",
                            redacted(&config.url),
                            config.tls_ca_file.as_ref().map_or_else(
                                || "the system's roots (or set REDIS_TLS_CA_FILE)".to_owned(),
                                |ca| format!("REDIS_TLS_CA_FILE={}", ca.display())
                            )
                        )
                    })?;
            }
        }
        let mut builder = Builder::from_config(fred_config);
        builder
            .with_performance_config(|p| p.default_command_timeout = config.command_timeout)
            .with_connection_config(|c| {
                c.connection_timeout = Duration::from_secs(1);
                // A command resent after a dropped connection could run a script twice; one
                // attempt, and an error is an unknown outcome the caller settles.
                c.max_command_attempts = 1;
            })
            .set_policy(ReconnectPolicy::new_exponential(0, 50, 2_000, 2));
        let pool = builder
            .build_pool(config.pool_size)
            .context("building the Redis pool")?;
        let subscriber = builder
            .build_subscriber_client()
            .context("building the Redis subscriber")?;
        // Each returns the handle of a task that is already running (connection, reconnection,
        // re-subscription); dropping a handle detaches the task, which lives with the clients.
        drop(pool.connect());
        drop(subscriber.connect());
        drop(subscriber.manage_subscriptions());
        if !matches!(
            tokio::time::timeout(wait, pool.wait_for_connect()).await,
            Ok(Ok(()))
        ) {
            tracing::warn!(url = %redacted(&config.url), "gate_degraded: Redis does not answer yet; purchases use the database until it does");
        }
        Ok(Self {
            id: OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            pool,
            subscriber,
            prefix: config.prefix.clone(),
            drops: config.prefix.clone(),
            tasks: Tasks::new(),
        })
    }

    /// The client to send a command on. On a current-thread runtime (an HTTP worker's), the
    /// runtime's own client: opened on it at the first command, used once it is up. Its reply
    /// then wakes the buyer's task on the same thread, where a pool's client, whose connection
    /// task runs on the runtime the pool was opened on, wakes the worker from another thread
    /// (docs/benchmarks.md, "System calls and wake-ups"). Elsewhere, while that client is not
    /// connected, and once this connection is closed: one of the pool's. The runtime's client
    /// has the pool's configuration (timeouts, one attempt per command, reconnection) and lives
    /// as long as its runtime.
    pub(crate) fn client(&self) -> Client {
        self.own_client()
            .unwrap_or_else(|| self.pool.next().clone())
    }

    fn own_client(&self) -> Option<Client> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        if runtime.runtime_flavor() != tokio::runtime::RuntimeFlavor::CurrentThread
            || self.tasks.stop.is_cancelled()
        {
            return None;
        }
        let on = runtime.id();
        OWN.with_borrow_mut(|own| {
            if let Some(mine) = own.iter().find(|c| c.pool == self.id && c.runtime == on) {
                return mine.client.is_connected().then(|| mine.client.clone());
            }
            // A thread runs one runtime at a time: the clients of another are gone with it.
            own.retain(|c| c.runtime == on);
            let client = self.pool.next().clone_new();
            // The connection's task runs on this runtime from now on, reconnecting as the
            // pool's do; until it is up, the pool serves.
            drop(client.connect());
            own.push(OwnClient {
                pool: self.id,
                runtime: on,
                client,
            });
            None
        })
    }

    /// This connection with drop keys named by the database's `identity`
    /// (`{prefix}{identity}:drop:{42}:..`): drop ids restart after a reset or restore, and a new
    /// drop must not meet an old one's gate state. Channels and the budget stay on the prefix.
    #[must_use]
    pub fn mirroring(mut self, identity: &str) -> Self {
        self.drops = format!("{}{identity}:", self.prefix);
        self
    }

    /// Stops the background tasks (the counters are flushed one last time), waits up to
    /// `within` for them, and closes the clients. `false` when a task was still running then.
    pub async fn close(&self, within: Duration) -> bool {
        self.tasks.stop.cancel();
        self.tasks.tracker.close();
        let ended = tokio::time::timeout(within, self.tasks.tracker.wait())
            .await
            .is_ok();
        let _ = tokio::time::timeout(Duration::from_millis(200), async {
            let _ = self.subscriber.quit().await;
            let _ = self.pool.quit().await;
        })
        .await;
        ended
    }

    /// Calls `on_message` for every message on `channel` from now on, subscribing until it
    /// succeeds (then re-subscribing on reconnects). Messages missed while cut off are lost:
    /// each channel only hurries what a timer does anyway.
    pub fn subscribe(&self, channel: String, on_message: impl Fn(&Value) + Send + 'static) {
        let mut messages = self.subscriber.message_rx();
        let wanted = channel.clone();
        self.tasks.spawn(async move {
            loop {
                match messages.recv().await {
                    Ok(message) if message.channel == wanted.as_str() => on_message(&message.value),
                    Ok(_) => {}
                    // Fell behind: the messages missed only hurried a timer.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
        });
        let subscriber = self.subscriber.clone();
        self.tasks.spawn(async move {
            while let Err(error) = subscriber.subscribe(channel.clone()).await {
                tracing::debug!(error = %error, %channel, "subscription pending");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
    }

    pub async fn ping(&self) -> Result<(), String> {
        self.pool
            .next()
            .ping::<String>(None)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// The rustls client every connection uses: it trusts the CA certificates in the PEM file at
/// `ca` only, or the system's roots.
fn tls_client(ca: Option<&std::path::Path>) -> anyhow::Result<rustls::ClientConfig> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .with_context(|| format!("REDIS_TLS_CA_FILE {}: not readable", path.display()))?;
            for cert in certs {
                let cert =
                    cert.with_context(|| format!("REDIS_TLS_CA_FILE {}: not PEM", path.display()))?;
                roots.add(cert).with_context(|| {
                    format!("REDIS_TLS_CA_FILE {}: not a CA certificate", path.display())
                })?;
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                // A system root rustls cannot use is skipped, as every TLS client does.
                let _ = roots.add(cert);
            }
        }
    }
    anyhow::ensure!(
        !roots.is_empty(),
        "rediss:// needs CA certificates to verify Redis with: none in {}",
        ca.map_or_else(
            || "the system's store (set REDIS_TLS_CA_FILE)".to_owned(),
            |p| p.display().to_string()
        )
    );
    Ok(rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// One TLS handshake with `host:port`, as the clients will make it. `Ok` also when nothing
/// answers at all (Redis is down: the gate starts degraded); `Err` with the reason when
/// something answers and the handshake fails or stalls (a plaintext server, a certificate that
/// does not verify).
async fn handshake(host: &str, port: u16, client: Arc<rustls::ClientConfig>) -> Result<(), String> {
    const BOUND: Duration = Duration::from_secs(2);
    let Ok(Ok(tcp)) =
        tokio::time::timeout(BOUND, tokio::net::TcpStream::connect((host, port))).await
    else {
        return Ok(());
    };
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|e| format!("{host} is not a server name: {e}"))?;
    match tokio::time::timeout(
        BOUND,
        tokio_rustls::TlsConnector::from(client).connect(name, tcp),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!(
            "no TLS answer within {} s: is it a plaintext server?",
            BOUND.as_secs()
        )),
    }
}

/// `url` without its credentials, for logs: `redis://user:***@host:port`.
pub fn redacted(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, rest)), Some(at)) if at > scheme.len() => {
            let userinfo = &rest[..at - scheme.len() - 3];
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            format!("{scheme}://{user}:***@{}", &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use test_support::redis::{fresh_prefix, server_url};

    async fn opened() -> RedisConnection {
        let config = RedisConfig {
            url: server_url(),
            prefix: fresh_prefix(),
            pool_size: 2,
            command_timeout: Duration::from_millis(500),
            tls_ca_file: None,
        };
        RedisConnection::connect(&config, Duration::from_secs(2))
            .await
            .unwrap()
    }

    /// The id Redis gave the connection `client` sends on.
    async fn id_of(client: &Client) -> i64 {
        client
            .custom(fred::cmd!("CLIENT"), vec!["ID"])
            .await
            .unwrap()
    }

    async fn pool_ids(conn: &RedisConnection) -> Vec<i64> {
        let mut ids = Vec::new();
        for client in conn.pool.clients() {
            ids.push(id_of(client).await);
        }
        ids
    }

    /// The runtime's own client, once a command through `conn` went on it (within 2 s).
    async fn own_id(conn: &RedisConnection, pooled: &[i64]) -> i64 {
        let start = Instant::now();
        loop {
            let id = id_of(&conn.client()).await;
            if !pooled.contains(&id) {
                return id;
            }
            assert!(
                start.elapsed() < Duration::from_secs(2),
                "no client of the runtime's own"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// An HTTP worker's runtime is a current-thread one, as a plain `tokio::test`'s is: its
    /// first command goes on the pool while its own client connects; from then on every
    /// command goes on its own client, and another connection of the process gets another.
    #[tokio::test]
    async fn a_current_thread_runtime_sends_on_its_own_client_once_it_is_up() {
        let conn = opened().await;
        let pooled = pool_ids(&conn).await;
        let first = id_of(&conn.client()).await;
        assert!(
            pooled.contains(&first),
            "{first} not of the pool {pooled:?}"
        );
        let own = own_id(&conn, &pooled).await;
        for _ in 0..10 {
            assert_eq!(id_of(&conn.client()).await, own);
        }
        let other = opened().await;
        let others = pool_ids(&other).await;
        let theirs = own_id(&other, &others).await;
        assert_ne!(theirs, own, "each connection's own client");
        assert_eq!(id_of(&conn.client()).await, own);
        // Closed, it sends nothing more on its own client.
        conn.close(Duration::from_secs(1)).await;
        assert!(conn.own_client().is_none());
    }

    /// A multi-thread runtime (the main one: background tasks, the committers) sends on the
    /// pool.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_multi_thread_runtime_sends_on_the_pool() {
        let conn = opened().await;
        let pooled = pool_ids(&conn).await;
        for _ in 0..20 {
            let id = id_of(&conn.client()).await;
            assert!(pooled.contains(&id), "{id} not of the pool {pooled:?}");
        }
    }

    #[test]
    fn credentials_never_reach_the_log() {
        assert_eq!(
            redacted("redis://:hunter2@cache:6379/0"),
            "redis://:***@cache:6379/0"
        );
        assert_eq!(
            redacted("redis://app:hunter2@cache:6379"),
            "redis://app:***@cache:6379"
        );
        assert_eq!(redacted("redis://cache:6379"), "redis://cache:6379");
    }
}
