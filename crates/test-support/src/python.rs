//! The outside verifier of webhook signatures: Python's `standardwebhooks` package, the
//! reference library sellers use (`TEST_WEBHOOK_PYTHON`: an interpreter that has it; scripts/test
//! installs it pinned into a virtual environment of its own).

use std::io::Write as _;
use std::process::{Command, Stdio};

/// The verifier's program: reads `[{"headers": {...}, "body": "..."}, ...]` on stdin and
/// verifies each with the secret in `argv[1]` (timestamps within the library's tolerance of
/// now); prints how many verified, or fails naming the first that did not.
const VERIFY: &str = r#"
import json, sys
from standardwebhooks import Webhook
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
/// `standardwebhooks` verifies with `secret`; panics on the first it refuses.
pub fn verified_by_standardwebhooks(secret: &str, requests: &serde_json::Value) -> usize {
    crate::needs::needs(crate::needs::Service::Python);
    let python = std::env::var("TEST_WEBHOOK_PYTHON").expect(
        "TEST_WEBHOOK_PYTHON: a python3 with the standardwebhooks package (scripts/test sets it)",
    );
    let mut child = Command::new(&python)
        .args(["-c", VERIFY, secret])
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
