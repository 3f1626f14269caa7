//! The three-node MariaDB Galera Cluster scripts/galera-cluster started: `TEST_GALERA_URL` is
//! the URL it printed, `TEST_GALERA_DIR` the folder it was given (each node's pid file and the
//! script that starts it again). The fault tests on the cluster kill, pause and restart its
//! nodes; they share it, run one at a time (.config/nextest.toml) and leave it as they found it:
//! three synced nodes.
//!
//! Nodes are numbered from 0 in the URL's order (node 0 is the one written through first).

use crate::needs::{Service, needs};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// The running cluster.
#[derive(Debug, Clone)]
pub struct Cluster {
    url: String,
    hosts: Vec<String>,
    dir: PathBuf,
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name}: scripts/test sets it for the Galera stage (scripts/galera-cluster DIR)")
    })
}

impl Cluster {
    /// The cluster the environment names; panics when it names none.
    pub fn from_env() -> Self {
        needs(Service::Mysql);
        let url = var("TEST_GALERA_URL");
        let hosts: Vec<String> = url
            .strip_prefix("mysql://")
            .and_then(|rest| rest.split_once('@'))
            .map(|(_, hosts)| hosts.split('/').next().unwrap_or_default())
            .unwrap_or_else(|| panic!("TEST_GALERA_URL is not mysql://user@h1:p1,h2:p2,...: {url}"))
            .split(',')
            .map(str::to_owned)
            .collect();
        assert_eq!(hosts.len(), 3, "three nodes in {url}");
        Self {
            url: url.trim_end_matches('/').to_owned(),
            hosts,
            dir: PathBuf::from(var("TEST_GALERA_DIR")),
        }
    }

    /// Creates database `name` through the first node that answers; the URL naming all three
    /// nodes and it.
    pub fn database(&self, name: &str) -> String {
        let created = (0..self.hosts.len())
            .any(|node| self.sql(node, &format!("CREATE DATABASE {name}")).is_ok());
        assert!(created, "no node created database {name}");
        format!("{}/{name}", self.url)
    }

    /// The pid in node `node`'s pid file, if it holds one.
    fn pid_file(&self, node: usize) -> Option<u32> {
        let file = self.dir.join(format!("node{}.pid", node + 1));
        std::fs::read_to_string(file).ok()?.trim().parse().ok()
    }

    /// The pid of node `node`'s mariadbd, waiting up to 30 s for a starting node to write it.
    pub fn pid(&self, node: usize) -> u32 {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(pid) = self.pid_file(node) {
                return pid;
            }
            assert!(Instant::now() < until, "node {node} wrote no pid file");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL to node `node` (a machine lost: no goodbye to its peers), returning once the
    /// process is gone.
    pub fn kill(&self, node: usize) {
        let pid = self.pid(node);
        // A paused node dies too.
        crate::try_signal(pid, "CONT");
        crate::signal_pid(pid, "KILL");
        let until = Instant::now() + Duration::from_secs(10);
        while alive(pid) {
            assert!(
                Instant::now() < until,
                "node {node} (pid {pid}) outlived SIGKILL by 10 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Brings back what an earlier test left down (a test that failed half-way): a paused node
    /// is resumed, a killed one started again. Then [`until_synced`](Self::until_synced) waits
    /// for them.
    pub fn restore(&self) {
        for node in 0..self.hosts.len() {
            match self.pid_file(node) {
                Some(pid) if alive(pid) => {
                    crate::try_signal(pid, "CONT");
                }
                _ => self.restart(node),
            }
        }
    }

    /// SIGSTOP to node `node`: its connections stay open and nothing answers, a partition as
    /// its peers and clients see it.
    pub fn pause(&self, node: usize) {
        crate::pause_pid(self.pid(node));
    }

    /// SIGCONT to a paused node.
    pub fn resume(&self, node: usize) {
        crate::resume_pid(self.pid(node));
    }

    /// Starts a killed node again (`nodeN.start`): it joins the running cluster by state
    /// transfer. Returns once it runs; [`until_synced`](Self::until_synced) waits for the join.
    pub fn restart(&self, node: usize) {
        let pid_file = self.dir.join(format!("node{}.pid", node + 1));
        let _ = std::fs::remove_file(&pid_file);
        let script = self.dir.join(format!("node{}.start", node + 1));
        let status = Command::new("bash").arg(&script).status().unwrap();
        assert!(status.success(), "{}: {status}", script.display());
        self.pid(node);
    }

    /// Runs `statements` on node `node` with the `mariadb` client (10 s at most); its output.
    pub fn sql(&self, node: usize, statements: &str) -> Result<String, String> {
        let (host, port) = self.hosts[node].split_once(':').unwrap();
        let out = Command::new("timeout")
            .args([
                "10",
                "mariadb",
                "--connect-timeout=2",
                "-h",
                host,
                "-P",
                port,
            ])
            .args(["-u", "root", "-N", "-e", statements])
            .output()
            .map_err(|e| format!("the mariadb client: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "node {node}: {} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// The rows `query` returns on node `node` once that node has applied every write set the
    /// cluster committed before it (`wsrep_sync_wait`), one string per row.
    pub fn rows_on(&self, node: usize, query: &str) -> Vec<String> {
        self.sql(node, &format!("SET SESSION wsrep_sync_wait = 1; {query}"))
            .unwrap_or_else(|e| panic!("{query}: {e}"))
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// A status variable of node `node` (`wsrep_local_state`, ...), when it answers.
    pub fn status(&self, node: usize, name: &str) -> Option<String> {
        let out = self.sql(node, &format!("SHOW STATUS LIKE '{name}'")).ok()?;
        out.split('\t').nth(1).map(|value| value.trim().to_owned())
    }

    /// Whether node `node` is synced (state 4) in a primary component of `size` nodes.
    pub fn synced(&self, node: usize, size: usize) -> bool {
        self.status(node, "wsrep_local_state").as_deref() == Some("4")
            && self.status(node, "wsrep_cluster_status").as_deref() == Some("Primary")
            && self.status(node, "wsrep_cluster_size") == Some(size.to_string())
    }

    /// Waits until every node of `nodes` is synced in a primary component of `nodes.len()`
    /// nodes; how long that took. Panics, with the last lines of each node's log, past `within`.
    pub fn until_synced(&self, nodes: &[usize], within: Duration) -> Duration {
        let start = Instant::now();
        while !nodes.iter().all(|&node| self.synced(node, nodes.len())) {
            if start.elapsed() > within {
                let logs: Vec<String> = nodes
                    .iter()
                    .map(|node| {
                        let log =
                            std::fs::read_to_string(self.dir.join(format!("node{}.log", node + 1)))
                                .unwrap_or_default();
                        let tail: Vec<&str> = log.lines().rev().take(8).collect();
                        format!(
                            "node {node}:\n{}",
                            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                        )
                    })
                    .collect();
                panic!(
                    "nodes {nodes:?} not synced in a primary component of {} within {within:?}\n{}",
                    nodes.len(),
                    logs.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        start.elapsed()
    }
}

/// Whether process `pid` still runs (a zombie waiting for its parent does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'))
    })
}
