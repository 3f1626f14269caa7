//! A MariaDB server of the test's own: `mariadb-install-db` on a temporary directory, then
//! `mariadbd` on a free loopback port, so a test can kill it, pause it and start it again on
//! the same data. Killed and removed on drop.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A private MariaDB server.
pub struct PrivateMariadb {
    child: crate::Daemon,
    port: u16,
    dir: PathBuf,
    /// CA, certificate and key of a server that accepts TLS connections only.
    tls: Option<[PathBuf; 3]>,
}

fn missing(what: &str) -> String {
    format!(
        "{what} must be installed for the database fault tests (apt-get install mariadb-server)"
    )
}

impl PrivateMariadb {
    /// Initialises a data directory, starts the server and waits until it answers.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// [`start`](Self::start) for a server that accepts TLS connections only
    /// (`--require-secure-transport=ON`), with `cert` and `key` signed by `ca`.
    pub fn start_tls(ca: &Path, cert: &Path, key: &Path) -> Self {
        Self::start_with(Some([ca.to_owned(), cert.to_owned(), key.to_owned()]))
    }

    fn start_with(tls: Option<[PathBuf; 3]>) -> Self {
        crate::needs::needs(crate::needs::Service::Mysql);
        let dir = std::env::temp_dir().join(format!("mariadb-{}", uuid::Uuid::new_v4().simple()));
        // A temporary directory of its own: bootstraps running at once in the shared /tmp have
        // been seen to lose each other's temporary tables.
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        let out = Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.join("data").display()))
            .arg(format!("--tmpdir={}", dir.join("tmp").display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--user=root",
                "--skip-test-db",
            ])
            .output()
            .unwrap_or_else(|_| panic!("{}", missing("mariadb-install-db")));
        assert!(
            out.status.success(),
            "mariadb-install-db failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = Self {
            child: crate::Daemon::default(),
            port,
            dir,
            tls,
        };
        server.launch();
        server
    }

    /// `mysql://root@127.0.0.1:port` (no database).
    pub fn server_url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}", self.port)
    }

    /// Creates database `name` and returns its URL.
    pub fn database(&self, name: &str) -> String {
        self.sql(&format!("CREATE DATABASE {name}"));
        format!("{}/{name}", self.server_url())
    }

    /// Runs `statement` with the `mariadb` client; its output.
    pub fn sql(&self, statement: &str) -> String {
        self.client(statement)
            .unwrap_or_else(|e| panic!("{statement}: {e}"))
    }

    fn client(&self, statement: &str) -> Result<String, String> {
        let mut command = Command::new("mariadb");
        if let Some([ca, _, _]) = &self.tls {
            command
                .arg("--ssl")
                .arg(format!("--ssl-ca={}", ca.display()));
        }
        let out = command
            .args([
                "-h",
                "127.0.0.1",
                "-P",
                &self.port.to_string(),
                "-u",
                "root",
                "-N",
                "-e",
            ])
            .arg(statement)
            .output()
            .map_err(|_| missing("the mariadb client"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Kills the server with SIGKILL (a crash: no shutdown, InnoDB recovers at the next start).
    pub fn kill(&mut self) {
        self.child.kill();
    }

    /// Starts the server again on the same data and port, after a [`kill`](Self::kill).
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    /// Stops the process with SIGSTOP: connections stay open and nothing answers.
    pub fn pause(&self) {
        self.child.pause();
    }

    /// Resumes a paused server with SIGCONT.
    pub fn resume(&self) {
        self.child.resume();
    }

    fn launch(&mut self) {
        let log = std::fs::File::create(self.dir.join("server.log")).unwrap();
        let mut command = Command::new("mariadbd");
        command.arg("--no-defaults");
        if let Some([ca, cert, key]) = &self.tls {
            command
                .arg(format!("--ssl-ca={}", ca.display()))
                .arg(format!("--ssl-cert={}", cert.display()))
                .arg(format!("--ssl-key={}", key.display()))
                .arg("--require-secure-transport=ON");
        }
        let child = command
            .arg(format!("--datadir={}", self.dir.join("data").display()))
            .arg(format!("--tmpdir={}", self.dir.join("tmp").display()))
            .arg(format!("--socket={}", self.dir.join("sock").display()))
            .arg(format!("--port={}", self.port))
            .args([
                "--bind-address=127.0.0.1",
                "--user=root",
                "--skip-log-bin",
                "--innodb-buffer-pool-size=64M",
                "--max-connections=500",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|_| panic!("{}", missing("mariadbd")));
        self.child.run(child);
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if self.client("SELECT 1").is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        panic!(
            "private mariadbd on port {} did not start:\n{log}",
            self.port
        );
    }
}

impl Drop for PrivateMariadb {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
