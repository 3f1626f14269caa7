//! How callers are identified, and the payment provider's secret.

use super::{ConfigError, bad, secret};
use ipnet::IpNet;
use secrecy::{ExposeSecret as _, SecretString};

/// How callers are identified.
#[derive(Debug, Clone)]
pub enum Auth {
    /// HS256 JWTs (`AUTH_JWT_SECRET`, `AUTH_JWT_ISSUER`, `AUTH_JWT_AUDIENCE`).
    Jwt {
        /// The signing secret: at least 32 bytes, never a placeholder.
        secret: SecretString,
        /// The required `iss`, when set.
        issuer: Option<String>,
        /// The required `aud`, when set.
        audience: Option<String>,
        /// The furthest ahead a token's `exp` may lie (`AUTH_JWT_MAX_TTL_S`, default a day).
        max_ttl: std::time::Duration,
    },
    /// Identity headers from a gateway at one of these addresses (`AUTH_TRUSTED_PROXIES`).
    TrustedHeader {
        /// Peers whose identity headers count.
        proxies: Vec<IpNet>,
    },
}

impl Auth {
    /// `embedded`: SQLite on a loopback address, the one mode where trusting headers from
    /// loopback is the default; `loopback`: whether the API listens on loopback only.
    pub(super) fn read(
        get: &impl Fn(&str) -> Option<String>,
        loopback: bool,
        embedded: bool,
    ) -> Result<Self, ConfigError> {
        let trusted_header = || match get("AUTH_TRUSTED_PROXIES") {
            Some(raw) => Ok(Self::TrustedHeader {
                proxies: proxies(&raw)?,
            }),
            None if loopback => Ok(Self::TrustedHeader {
                proxies: loopback_nets(),
            }),
            None => Err(bad(
                "AUTH_TRUSTED_PROXIES",
                "required with AUTH_MODE=trusted-header when BIND_ADDR is not loopback",
            )),
        };
        let jwt_secret = secret::read(get, "AUTH_JWT_SECRET", "AUTH_JWT_SECRET_FILE")?;
        match get("AUTH_MODE").as_deref() {
            Some("jwt") => {
                let secret = jwt_secret
                    .ok_or_else(|| bad("AUTH_JWT_SECRET", "required when AUTH_MODE=jwt"))?;
                secret::check_strength("AUTH_JWT_SECRET", secret.expose_secret())?;
                Ok(Self::Jwt {
                    secret,
                    issuer: get("AUTH_JWT_ISSUER"),
                    audience: get("AUTH_JWT_AUDIENCE"),
                    max_ttl: std::time::Duration::from_secs(super::number(
                        get,
                        "AUTH_JWT_MAX_TTL_S",
                        86_400_u64,
                        60,
                    )?),
                })
            }
            Some("trusted-header") => trusted_header(),
            // Trusting headers by default is only safe where nothing but this machine can call.
            None if embedded => trusted_header(),
            None => Err(bad(
                "AUTH_MODE",
                "required outside the embedded mode (SQLite on a loopback BIND_ADDR): choose jwt or trusted-header",
            )),
            Some(other) => Err(bad(
                "AUTH_MODE",
                format!("{other:?} is not jwt or trusted-header"),
            )),
        }
    }
}

/// Loopback, the trusted peers of a loopback-bound trusted-header server by default.
pub(super) fn loopback_nets() -> Vec<IpNet> {
    ["127.0.0.0/8", "::1/128"]
        .iter()
        .filter_map(|net| net.parse().ok())
        .collect()
}

/// The peers whose `X-Forwarded-For` names the client: the trusted proxies of the
/// trusted-header mode, or `AUTH_TRUSTED_PROXIES` when set in the JWT mode (none otherwise).
pub(super) fn forwarding_proxies(
    get: &impl Fn(&str) -> Option<String>,
    auth: &Auth,
) -> Result<Vec<IpNet>, ConfigError> {
    match auth {
        Auth::TrustedHeader { proxies } => Ok(proxies.clone()),
        Auth::Jwt { .. } => get("AUTH_TRUSTED_PROXIES")
            .map(|raw| proxies(&raw))
            .transpose()
            .map(Option::unwrap_or_default),
    }
}

/// `AUTH_TRUSTED_PROXIES`: comma-separated CIDRs or single addresses; a network of every
/// address (`0.0.0.0/0`, `::/0`) is refused: it would trust any client's identity headers.
fn proxies(raw: &str) -> Result<Vec<IpNet>, ConfigError> {
    let nets = parse_proxies(raw)?;
    if let Some(open) = nets.iter().find(|net| net.prefix_len() == 0) {
        return Err(bad(
            "AUTH_TRUSTED_PROXIES",
            format!("{open} trusts every address; name the gateways' addresses or networks"),
        ));
    }
    Ok(nets)
}

fn parse_proxies(raw: &str) -> Result<Vec<IpNet>, ConfigError> {
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<IpNet>()
                .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    bad(
                        "AUTH_TRUSTED_PROXIES",
                        format!("{s:?} is not a CIDR or an address"),
                    )
                })
        })
        .collect()
}

/// `PAYMENT_WEBHOOK_SECRET` (or `_FILE`), checked for strength; `None` when unset.
///
/// # Errors
/// [`ConfigError`] when it is unreadable or too weak.
pub fn payment_secret(
    get: &impl Fn(&str) -> Option<String>,
) -> Result<Option<SecretString>, ConfigError> {
    let secret = secret::read(get, "PAYMENT_WEBHOOK_SECRET", "PAYMENT_WEBHOOK_SECRET_FILE")?;
    if let Some(secret) = &secret {
        secret::check_strength("PAYMENT_WEBHOOK_SECRET", secret.expose_secret())?;
    }
    Ok(secret)
}
