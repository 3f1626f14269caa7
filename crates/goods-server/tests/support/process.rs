//! Starting the real `goods-server` binary for a test, shared by the binary and fault tests.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The ops listener (`/metrics`) of every server started here, by its API base URL.
static OPS: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// Every log line of every server started here, by its API base URL.
static LOGS: std::sync::Mutex<Vec<(String, Vec<String>)>> = std::sync::Mutex::new(Vec::new());

/// Starts the binary in `dir` with only `vars` in its environment (and `BIND_ADDR` and
/// `OPS_BIND_ADDR` on free loopback ports unless `vars` names them); returns it and its base
/// URL, read from the first log line (the ops listener's, from the second, is what [`exposition`]
/// reads). The rest of its log goes to the test's stderr, so the pipe never fills.
pub fn spawn<'a>(
    dir: &Path,
    vars: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_goods-server"))
        .current_dir(dir)
        .env_clear()
        .env("BIND_ADDR", "127.0.0.1:0")
        .env("OPS_BIND_ADDR", "127.0.0.1:0")
        .envs(vars)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr = first
        .split("listening on ")
        .nth(1)
        .unwrap_or_else(|| panic!("first log line was {first:?}"))
        .trim()
        .to_owned();
    let second = lines.next().unwrap().unwrap();
    let ops = second
        .split("ops listening on ")
        .nth(1)
        .unwrap_or_else(|| panic!("second log line was {second:?}"))
        .trim()
        .to_owned();
    let base = format!("http://{addr}");
    {
        let mut known = OPS.lock().unwrap();
        known.retain(|(b, _)| *b != base);
        known.push((base.clone(), format!("http://{ops}")));
    }
    LOGS.lock().unwrap().retain(|(b, _)| *b != base);
    LOGS.lock()
        .unwrap()
        .push((base.clone(), vec![first, second]));
    let logged = base.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            eprintln!("[server] {line}");
            if let Some((_, kept)) = LOGS.lock().unwrap().iter_mut().find(|(b, _)| *b == logged) {
                kept.push(line);
            }
        }
    });
    // The listeners are bound (and named) before the store is opened and migrated: the server
    // is built once the ops listener answers. A test that starts a second instance on the same
    // database must not find the first still migrating.
    until_built(&ops);
    (child, base)
}

/// Waits until the ops listener at `addr` answers `/health/live`: a connection made earlier
/// waits in the backlog until the server runs, and is closed unanswered if the start fails
/// (the caller then finds the process exited).
fn until_built(addr: &str) {
    use std::io::{Read as _, Write as _};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return;
    };
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(60)));
    let _ = stream.write_all(b"GET /health/live HTTP/1.0\r\nHost: localhost\r\n\r\n");
    let mut first = [0_u8; 12];
    let _ = stream.read(&mut first);
}

/// The log lines the server at `base` wrote so far.
pub fn logs_of(base: &str) -> Vec<String> {
    LOGS.lock()
        .unwrap()
        .iter()
        .find(|(b, _)| b == base)
        .map(|(_, lines)| lines.clone())
        .unwrap_or_default()
}

/// The ops listener of the server at `base`.
pub fn ops_of(base: &str) -> String {
    OPS.lock()
        .unwrap()
        .iter()
        .find(|(b, _)| b == base)
        .map(|(_, ops)| ops.clone())
        .unwrap_or_else(|| panic!("no server started at {base}"))
}

/// A value from the server's `/metrics`, by metric name (an unlabelled series).
pub async fn metric(http: &reqwest::Client, base: &str, name: &str) -> u64 {
    exposition(http, base)
        .await
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

/// The sum of every series of `name` (labelled or not) in the server's `/metrics`; 0 when the
/// server has not exported it yet (a counter appears at its first increment).
#[allow(dead_code)] // the binary tests read single series only
pub async fn metric_sum(http: &reqwest::Client, base: &str, name: &str) -> f64 {
    exposition(http, base)
        .await
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            (rest.starts_with(' ') || rest.starts_with('{')).then_some(rest)?;
            rest.rsplit(' ').next()?.parse::<f64>().ok()
        })
        .sum()
}

/// The `/metrics` page of the server at `base`, from its ops listener.
pub async fn exposition(http: &reqwest::Client, base: &str) -> String {
    http.get(format!("{}/metrics", ops_of(base)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}
