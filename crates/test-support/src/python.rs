//! The outside verifier of webhook signatures: Python's `standardwebhooks` package, the
//! reference library sellers use (`TEST_WEBHOOK_PYTHON`: an interpreter that has it; scripts/test
//! installs it pinned into a virtual environment of its own).

use std::io::Write as _;
use std::process::{Command, Stdio};

/// The verifier's program: reads `[{"headers": {...}, "body": "..."}, ...]` on stdin and
/// verifies each with the secret in `argv[1]`, its timestamp within the library's tolerance of
/// now: the real clock's, or the Unix time in `argv[2]` (a test's clock, which the library reads
/// through `datetime.now`); prints how many verified, or fails naming the first that did not.
const VERIFY: &str = r#"
import json, sys
from datetime import datetime, timezone
import standardwebhooks.webhooks
from standardwebhooks import Webhook
if len(sys.argv) > 2:
    at = datetime.fromtimestamp(int(sys.argv[2]), tz=timezone.utc)
    class TestClock(datetime):
        @classmethod
        def now(cls, tz=None):
            return at.astimezone(tz) if tz else at.replace(tzinfo=None)
    standardwebhooks.webhooks.datetime = TestClock
webhook = Webhook(sys.argv[1])
requests = json.load(sys.stdin)
for i, request in enumerate(requests):
    try:
        webhook.verify(request["body"].encode(), request["headers"])
    except Exception as error:
        sys.exit(f"request {i} ({request['headers'].get('webhook-id')}): {error!r}")
print(len(requests))
"#;

/// How many of `requests` (each `{"headers": {name: value}, "body": text}`) Python's
/// `standardwebhooks` verifies with `secret` now; panics on the first it refuses.
pub fn verified_by_standardwebhooks(secret: &str, requests: &serde_json::Value) -> usize {
    verify(secret, requests, None)
}

/// As [`verified_by_standardwebhooks`], with the library's clock reading `now` (a test clock's
/// time): a timestamp more than five minutes from it is refused, as the library refuses one
/// five minutes from the real time.
pub fn verified_by_standardwebhooks_at(
    secret: &str,
    requests: &serde_json::Value,
    now: time::OffsetDateTime,
) -> usize {
    verify(secret, requests, Some(now.unix_timestamp()))
}

fn verify(secret: &str, requests: &serde_json::Value, now: Option<i64>) -> usize {
    crate::needs::needs(crate::needs::Service::Python);
    let python = std::env::var("TEST_WEBHOOK_PYTHON").expect(
        "TEST_WEBHOOK_PYTHON: a python3 with the standardwebhooks package (scripts/test sets it)",
    );
    let mut args = vec!["-c".to_owned(), VERIFY.to_owned(), secret.to_owned()];
    args.extend(now.map(|now| now.to_string()));
    let mut child = Command::new(&python)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(requests.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "standardwebhooks refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}
