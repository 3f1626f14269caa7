//! Sellers' webhooks over HTTP(S): [`HttpSender`] posts a signed event to the address the
//! application checked (never one it resolves itself), does not follow redirects (a redirect
//! is an answer, and not a 2xx), waits at most its timeout, and reads at most 1 KiB of the
//! answer. TLS (rustls with ring) verifies the endpoint against the system's roots
//! (`SSL_CERT_FILE` / `SSL_CERT_DIR` name others, as for every rustls-native-certs client).

use async_trait::async_trait;
use goods_domain::ports::{WebhookRequest, WebhookSender};
use goods_domain::webhook::AttemptOutcome;
use std::sync::Arc;
use std::time::Duration;

/// The most of an answer's body that is read (and discarded).
pub const MAX_ANSWER: usize = 1024;

#[derive(Clone)]
pub struct HttpSender {
    timeout: Duration,
    tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for HttpSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSender")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl HttpSender {
    /// A sender waiting at most `timeout` for each answer (`WEBHOOK_TIMEOUT_MS`), trusting the
    /// system's CA certificates.
    pub fn new(timeout: Duration) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            // A system root rustls cannot use is skipped, as every TLS client does.
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            tracing::warn!("no CA certificates found: https:// webhook endpoints will not verify");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map(|b| b.with_root_certificates(roots).with_no_client_auth())
            .unwrap_or_else(|_| {
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth()
            });
        Self {
            timeout,
            tls: Arc::new(tls),
        }
    }

    async fn post(&self, request: &WebhookRequest) -> Result<u16, String> {
        let url = reqwest::Url::parse(&request.url).map_err(|e| format!("url: {e}"))?;
        let mut client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(self.timeout)
            .no_proxy()
            .use_preconfigured_tls((*self.tls).clone());
        if let Some(host) = url
            .host_str()
            .filter(|h| h.parse::<std::net::IpAddr>().is_err())
        {
            // The name connects to the address the application checked, and to no other.
            client = client.resolve(host, request.address);
        }
        let client = client.build().map_err(|e| format!("client: {e}"))?;
        let mut answer = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", &request.id)
            .header("webhook-timestamp", request.timestamp.to_string())
            .header("webhook-signature", &request.signature)
            .body(request.body.clone())
            .send()
            .await
            .map_err(|e| describe(&e))?;
        let status = answer.status().as_u16();
        let mut read = 0;
        while read < MAX_ANSWER {
            match answer.chunk().await {
                Ok(Some(chunk)) => read += chunk.len(),
                // The answer's status is what counts; a body cut short does not change it.
                Ok(None) | Err(_) => break,
            }
        }
        Ok(status)
    }
}

/// Why a request had no answer, without the URL (the seller knows it; logs need not).
fn describe(error: &reqwest::Error) -> String {
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    let mut why = what.to_owned();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        why = format!("{why}: {cause}");
        source = cause.source();
    }
    why
}

#[async_trait]
impl WebhookSender for HttpSender {
    async fn send(&self, request: &WebhookRequest) -> AttemptOutcome {
        match self.post(request).await {
            Ok(status) => AttemptOutcome::Answered(status),
            Err(why) => AttemptOutcome::NoAnswer(why),
        }
    }
}
