//! Real Redis servers for tests.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The shared server's URL: `TEST_REDIS_URL`, else a Redis 7 container when Docker answers, else
/// a panic that says how to provide one. Tests share it through distinct key prefixes.
pub fn server_url() -> String {
    crate::needs::needs(crate::needs::Service::Redis);
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Some(url) = std::env::var("TEST_REDIS_URL")
            .ok()
            .filter(|u| !u.is_empty())
        {
            return url;
        }
        if crate::mysql::docker_answers() {
            return start_container();
        }
        panic!(
            "no Redis for the gate tests: set TEST_REDIS_URL (e.g. redis://127.0.0.1:6379) or \
             start a Docker engine for testcontainers"
        )
    })
    .clone()
}

/// A Redis Cluster of three masters, in fred's form (`redis-cluster://host:port?node=...`):
/// `TEST_REDIS_CLUSTER_URL` (scripts/test starts one and sets it), else a cluster of this test
/// process's own, started once from the local `redis-server` and stopped when the process ends.
pub fn cluster_url() -> String {
    crate::needs::needs(crate::needs::Service::Redis);
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        std::env::var("TEST_REDIS_CLUSTER_URL")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(start_cluster)
    })
    .clone()
}

fn start_cluster() -> String {
    start_cluster_with(None)
}

/// A Redis Cluster of three masters of this test process's own that speaks TLS only, clients
/// and cluster bus alike, with `pki`'s server certificate; in fred's form
/// (`rediss-cluster://host:port?node=...`).
pub fn private_tls_cluster(pki: &crate::tls::TestPki) -> String {
    start_cluster_with(Some(pki))
}

/// Starts three `redis-server --cluster-enabled yes` nodes on free ports and joins them. Each
/// node runs under a shell that kills it once this process's end closes the shell's stdin, so
/// a cluster never outlives the test process that started it (nothing to stop by hand).
fn start_cluster_with(tls: Option<&crate::tls::TestPki>) -> String {
    crate::needs::needs(crate::needs::Service::Redis);
    let dir = std::env::temp_dir().join(format!("goods-cluster-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    // Redis puts a node's cluster bus 10,000 ports above it, at most 65,535: take ports from a
    // range where both are below that, and free.
    let mut ports: Vec<u16> = Vec::new();
    // A random start: test processes start clusters at the same moment, and a port checked
    // free here is only taken when its node starts.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut candidate = 20_000 + u16::try_from(nanos % 25_000).unwrap_or(0);
    while ports.len() < 3 {
        candidate = if candidate >= 45_000 {
            20_000
        } else {
            candidate + 1
        };
        let free = |p: u16| TcpListener::bind(("127.0.0.1", p)).is_ok();
        if free(candidate) && free(candidate + 10_000) {
            ports.push(candidate);
        }
    }
    let (listen, client_tls) = match tls {
        None => (String::new(), Vec::new()),
        Some(pki) => {
            let (cert, key) = pki.server();
            (
                format!(
                    "--tls-cluster yes --tls-cert-file {} --tls-key-file {} --tls-ca-cert-file {} \
                     --tls-auth-clients no",
                    cert.display(),
                    key.display(),
                    pki.ca_pem().display()
                ),
                vec![
                    "--tls".to_owned(),
                    "--cacert".to_owned(),
                    pki.ca_pem().display().to_string(),
                ],
            )
        }
    };
    for port in &ports {
        let listen = if tls.is_some() {
            format!("--port 0 --tls-port {port} {listen}")
        } else {
            format!("--port {port}")
        };
        let node = format!(
            "redis-server {listen} --bind 127.0.0.1 --cluster-enabled yes \
             --cluster-config-file {dir}/nodes-{port}.conf --cluster-node-timeout 2000 \
             --save '' --appendonly no --dir {dir} >/dev/null 2>&1 & node=$!; \
             cat >/dev/null; kill $node; rm -rf {dir}",
            dir = dir.display()
        );
        let child = Command::new("sh")
            .args(["-c", &node])
            .stdin(Stdio::piped())
            .spawn()
            .expect("redis-server must be installed for the cluster tests (apt-get install redis-server)");
        // The pipe's write end stays open for the life of the process; its end closes it.
        std::mem::forget(child);
    }
    let cli = |port: u16, args: &[&str]| {
        Command::new("redis-cli")
            .args(["-p", &port.to_string()])
            .args(&client_tls)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    for port in &ports {
        let up = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            cli(*port, &["PING"]).is_some_and(|out| out.trim() == "PONG")
        });
        assert!(up, "cluster node on port {port} did not start");
    }
    let nodes: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let created = Command::new("redis-cli")
        .args(&client_tls)
        .args(["--cluster", "create"])
        .args(&nodes)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("redis-cli must be installed for the cluster tests");
    assert!(
        created.status.success(),
        "redis-cli --cluster create: {}",
        String::from_utf8_lossy(&created.stdout)
    );
    let ok = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        ports.iter().all(|p| {
            cli(*p, &["CLUSTER", "INFO"]).is_some_and(|info| info.contains("cluster_state:ok"))
        })
    });
    assert!(ok, "the Redis Cluster did not reach cluster_state:ok");
    let scheme = if tls.is_some() {
        "rediss-cluster"
    } else {
        "redis-cluster"
    };
    format!(
        "{scheme}://{}?node={}&node={}",
        nodes[0], nodes[1], nodes[2]
    )
}

/// A key prefix no other test uses.
pub fn fresh_prefix() -> String {
    format!("test:{}:", uuid::Uuid::new_v4().simple())
}

fn start_container() -> String {
    use testcontainers_modules::redis::Redis;
    use testcontainers_modules::testcontainers::runners::AsyncRunner;
    use testcontainers_modules::testcontainers::{ImageExt, ReuseDirective};
    let run = crate::run_id();
    // Its own thread and runtime: this is called from inside the tests' runtimes. The thread
    // ends once the container answers; the container is marked for reuse, so dropping the
    // handle leaves it running for every other test process of the run (nextest runs each test
    // in a process of its own), and scripts/test removes it by its label when the run ends.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let container = Redis::default()
                .with_tag("7.2")
                .with_container_name(format!("goods-test-redis-{run}"))
                .with_label(crate::RUN_LABEL, run)
                .with_reuse(ReuseDirective::Always)
                .start()
                .await
                .unwrap();
            let port = container.get_host_port_ipv4(6379).await.unwrap();
            format!("redis://127.0.0.1:{port}")
        })
    })
    .join()
    .expect("the redis container did not start")
}

/// A `redis-server` of the test's own on a free loopback port, for tests that flush, kill,
/// pause or restart their server; never the shared one. Killed on drop.
pub struct PrivateRedis {
    child: Child,
    port: u16,
    /// The CA, certificate and key of a TLS-only server.
    tls: Option<[PathBuf; 3]>,
}

impl PrivateRedis {
    /// Starts one and waits until it answers.
    pub fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = Self {
            child: Self::spawn(port, None),
            port,
            tls: None,
        };
        server.wait_until_up();
        server
    }

    /// Starts one that speaks TLS only (no plaintext port), with `cert` and `key` (signed by
    /// `ca`), and waits until it answers over TLS.
    pub fn start_tls(ca: &Path, cert: &Path, key: &Path) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let tls = [ca.to_owned(), cert.to_owned(), key.to_owned()];
        let server = Self {
            child: Self::spawn(port, Some(&tls)),
            port,
            tls: Some(tls),
        };
        server.wait_until_up();
        server
    }

    /// Starts it again on the same port, empty (it keeps nothing on disk): what a Redis that
    /// restarted after a crash looks like.
    pub fn restart(&mut self) {
        self.kill();
        self.child = Self::spawn(self.port, self.tls.as_ref());
        self.wait_until_up();
    }

    /// Stops the process with SIGSTOP: connections stay open and nothing answers, as in a stall.
    pub fn pause(&self) {
        crate::pause(&self.child);
    }

    /// Resumes a paused server with SIGCONT; its data is intact.
    pub fn resume(&self) {
        crate::resume(&self.child);
    }

    fn wait_until_up(&self) {
        for _ in 0..500 {
            if self.cli(&["PING"]).is_some_and(|out| out.trim() == "PONG") {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("private redis-server on port {} did not start", self.port);
    }

    fn spawn(port: u16, tls: Option<&[PathBuf; 3]>) -> Child {
        crate::needs::needs(crate::needs::Service::Redis);
        let mut command = Command::new("redis-server");
        match tls {
            None => command.args(["--port", &port.to_string()]),
            Some([ca, cert, key]) => command
                .args(["--port", "0", "--tls-port", &port.to_string()])
                .arg("--tls-ca-cert-file")
                .arg(ca)
                .arg("--tls-cert-file")
                .arg(cert)
                .arg("--tls-key-file")
                .arg(key)
                .args(["--tls-auth-clients", "no"]),
        };
        command
            .args([
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server must be installed for fault-injection tests (apt-get install redis-server)")
    }

    /// Its URL: `rediss://` for a TLS-only server.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// Runs `redis-cli` against it; the output, or `None` when it did not answer.
    pub fn cli(&self, args: &[&str]) -> Option<String> {
        let mut command = Command::new("redis-cli");
        command.args(["-p", &self.port.to_string()]);
        if let Some([ca, _, _]) = &self.tls {
            command.arg("--tls").arg("--cacert").arg(ca);
        }
        let out = command.args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Kills the server (fault injection).
    pub fn kill(&mut self) {
        crate::kill(&mut self.child);
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
    }
}
