//! A NATS server with JetStream of the test's own: `nats-server -js` on a free loopback port and
//! a temporary store directory, so a test can kill it, pause it and start it again on the same
//! stream. Killed and removed on drop.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A private NATS server.
pub struct PrivateNats {
    child: crate::Daemon,
    port: u16,
    dir: PathBuf,
}

impl PrivateNats {
    /// Starts a server and waits until it accepts connections.
    pub fn start() -> Self {
        crate::needs::needs(crate::needs::Service::Nats);
        let dir = std::env::temp_dir().join(format!("nats-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = Self {
            child: crate::Daemon::default(),
            port,
            dir,
        };
        server.launch();
        server
    }

    /// `nats://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server with SIGKILL (a crash; JetStream recovers its store at the next start).
    pub fn kill(&mut self) {
        self.child.kill();
    }

    /// Starts the server again on the same store and port, after a [`kill`](Self::kill).
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
        let child = Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string(), "-js", "-sd"])
            .arg(self.dir.join("store"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|_| {
                panic!("nats-server must be installed for the event tests (apt-get install nats-server)")
            });
        self.child.run(child);
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        panic!(
            "private nats-server on port {} did not start:\n{log}",
            self.port
        );
    }
}

impl Drop for PrivateNats {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Makes stream `name` (subjects `goods.>`) on the server at `url` with a duplicate window of
/// `window`, before the service would make it with the default of two minutes: a test that
/// must see every second publication of an id shortens the broker's dedupe out of the way.
pub async fn create_stream(url: &str, name: &str, window: Duration) {
    let client = async_nats::connect(url).await.unwrap();
    async_nats::jetstream::new(client)
        .create_stream(async_nats::jetstream::stream::Config {
            name: name.to_owned(),
            subjects: vec!["goods.>".to_owned()],
            duplicate_window: window,
            ..Default::default()
        })
        .await
        .unwrap();
}

/// A message of a JetStream stream, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub subject: String,
    /// Its `Nats-Msg-Id` header (the event id).
    pub id: String,
    pub payload: String,
}

/// Every message of `stream` on the server at `url`, in stream order; none when the server
/// or the stream is not there (yet).
pub async fn stored(url: &str, stream: &str) -> Vec<Stored> {
    let Ok(client) = async_nats::connect(url).await else {
        return Vec::new();
    };
    let js = async_nats::jetstream::new(client);
    let Ok(mut stream) = js.get_stream(stream).await else {
        return Vec::new();
    };
    let count = stream.info().await.map_or(0, |i| i.state.messages);
    let mut messages = Vec::new();
    for seq in 1..=count {
        let m = stream.get_raw_message(seq).await.unwrap();
        messages.push(Stored {
            subject: m.subject.to_string(),
            id: m
                .headers
                .get("Nats-Msg-Id")
                .map(|v| v.as_str().to_owned())
                .unwrap_or_default(),
            payload: String::from_utf8(m.payload.to_vec()).unwrap(),
        });
    }
    messages
}
