//! Sellers' webhooks (`WEBHOOK_*`).

use super::{ConfigError, bad};
use goods_app::WebhookSettings;
use goods_domain::webhook::Reach;
use std::time::Duration;

/// What endpoints may be and how deliveries are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhooks {
    /// `WEBHOOK_ALLOW_HTTP`, `WEBHOOK_ALLOW_PRIVATE`, `WEBHOOK_MAX_ENDPOINTS` (default 10).
    pub settings: WebhookSettings,
    /// How long a delivery waits for the endpoint's answer (`WEBHOOK_TIMEOUT_MS`, 10 s).
    pub timeout: Duration,
    /// Requests in flight per instance (`WEBHOOK_CONCURRENCY`, 32).
    pub concurrency: usize,
    /// An endpoint failing this long is disabled (`WEBHOOK_DISABLE_AFTER_S`, 5 days).
    pub disable_after: Duration,
    /// How often this instance looks for events to fan out and deliveries due, while it holds
    /// the `webhooks` lease (`WEBHOOK_POLL_MS`, 250; not in the spec); `None` (0): it never
    /// delivers (another instance does).
    pub poll: Option<Duration>,
}

fn switch(get: &impl Fn(&str) -> Option<String>, var: &'static str) -> Result<bool, ConfigError> {
    match get(var).as_deref() {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(bad(var, format!("{other:?} is not true or false"))),
    }
}

impl Webhooks {
    pub(super) fn read(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            settings: WebhookSettings {
                reach: Reach {
                    http: switch(get, "WEBHOOK_ALLOW_HTTP")?,
                    private: switch(get, "WEBHOOK_ALLOW_PRIVATE")?,
                },
                max_endpoints: super::number(get, "WEBHOOK_MAX_ENDPOINTS", 10, 1)?,
            },
            timeout: Duration::from_millis(super::number(get, "WEBHOOK_TIMEOUT_MS", 10_000, 1)?),
            concurrency: super::number(get, "WEBHOOK_CONCURRENCY", 32, 1)?,
            disable_after: Duration::from_secs(super::number(
                get,
                "WEBHOOK_DISABLE_AFTER_S",
                432_000,
                1,
            )?),
            poll: match super::number(get, "WEBHOOK_POLL_MS", 250_u64, 0)? {
                0 => None,
                ms => Some(Duration::from_millis(ms)),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<Webhooks, ConfigError> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Webhooks::read(&|var: &str| pairs.iter().find(|(k, _)| k == var).map(|(_, v)| v.clone()))
    }

    #[test]
    fn the_defaults_are_the_contracts() {
        let w = read(&[]).unwrap();
        assert_eq!(
            w,
            Webhooks {
                settings: WebhookSettings {
                    reach: Reach {
                        http: false,
                        private: false
                    },
                    max_endpoints: 10,
                },
                timeout: Duration::from_secs(10),
                concurrency: 32,
                disable_after: Duration::from_secs(5 * 24 * 3600),
                poll: Some(Duration::from_millis(250)),
            }
        );
    }

    #[test]
    fn an_instance_may_leave_deliveries_to_others() {
        assert_eq!(read(&[("WEBHOOK_POLL_MS", "0")]).unwrap().poll, None);
        assert_eq!(
            read(&[("WEBHOOK_POLL_MS", "1000")]).unwrap().poll,
            Some(Duration::from_secs(1))
        );
    }

    #[test]
    fn a_lab_allows_http_and_private_addresses_and_nothing_else_is_a_switch() {
        let w = read(&[
            ("WEBHOOK_ALLOW_HTTP", "true"),
            ("WEBHOOK_ALLOW_PRIVATE", "true"),
            ("WEBHOOK_MAX_ENDPOINTS", "2"),
        ])
        .unwrap();
        assert_eq!(
            (w.settings.reach, w.settings.max_endpoints),
            (
                Reach {
                    http: true,
                    private: true
                },
                2
            )
        );
        for (var, value) in [
            ("WEBHOOK_ALLOW_HTTP", "yes"),
            ("WEBHOOK_ALLOW_PRIVATE", "1"),
            ("WEBHOOK_MAX_ENDPOINTS", "0"),
            ("WEBHOOK_TIMEOUT_MS", "0"),
            ("WEBHOOK_CONCURRENCY", "-1"),
            ("WEBHOOK_DISABLE_AFTER_S", "soon"),
            ("WEBHOOK_POLL_MS", "-5"),
        ] {
            let refused = read(&[(var, value)]).unwrap_err();
            assert_eq!(refused.var, var);
        }
    }
}
