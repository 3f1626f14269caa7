//! Identity: a JWT (HS256), or headers set by a trusted gateway. Both fail closed: a token must
//! be signed, current (`exp`, `nbf`) and, when configured, from the expected issuer for the
//! expected audience; identity headers count only from a trusted peer and only once each.

use crate::ApiState;
use crate::problem::Problem;
use actix_web::dev::Payload;
use actix_web::http::header::{AUTHORIZATION, HeaderName};
use actix_web::{FromRequest, HttpMessage as _, HttpRequest, web};
use futures::future::{Ready, ready};
use goods_app::{Actor, Role};
use goods_domain::UserId;
use ipnet::IpNet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode};
use serde::Deserialize;
use std::sync::Arc;

pub mod hs256;

/// How callers prove who they are.
#[derive(Clone)]
pub enum AuthMode {
    /// `Authorization: Bearer <JWT>` signed HS256.
    Jwt(Arc<JwtCheck>),
    /// `X-User-Id` / `X-User-Role` as set by a gateway, accepted only from these peers.
    TrustedHeader(Arc<Vec<IpNet>>),
}

/// How a token is checked.
pub struct JwtCheck {
    key: DecodingKey,
    validation: Validation,
    /// The furthest ahead a token's `exp` may lie (`AUTH_JWT_MAX_TTL_S`): a token minted to
    /// last for ever is refused, so a leaked one expires.
    max_ttl: std::time::Duration,
}

impl AuthMode {
    /// JWT mode with `secret`, checking `iss` and `aud` when given, and refusing a token whose
    /// `exp` lies more than `max_ttl` ahead.
    pub fn jwt(
        secret: &[u8],
        issuer: Option<&str>,
        audience: Option<&str>,
        max_ttl: std::time::Duration,
    ) -> Self {
        hs256::install();
        let mut validation = Validation::new(Algorithm::HS256);
        // `sub` may be a number (the spec allows it), which the library's required-claim check
        // rejects; `Claims` requires it instead. A configured issuer or audience must be
        // present, not only right when present.
        let mut required = vec!["exp"];
        required.extend(issuer.map(|_| "iss"));
        required.extend(audience.map(|_| "aud"));
        validation.set_required_spec_claims(&required);
        validation.validate_nbf = true;
        if let Some(issuer) = issuer {
            validation.set_issuer(&[issuer]);
        }
        match audience {
            Some(audience) => validation.set_audience(&[audience]),
            None => validation.validate_aud = false,
        }
        Self::Jwt(Arc::new(JwtCheck {
            key: DecodingKey::from_secret(secret),
            validation,
            max_ttl,
        }))
    }

    /// Trusted-header mode, accepting identity headers from peers in `proxies` only.
    pub fn trusted_header(proxies: Vec<IpNet>) -> Self {
        Self::TrustedHeader(Arc::new(proxies))
    }

    pub(crate) fn identify(&self, req: &HttpRequest) -> Result<Actor, Problem> {
        match self {
            Self::Jwt(check) => from_jwt(check, req),
            Self::TrustedHeader(proxies) => {
                let trusted = req
                    .peer_addr()
                    .is_some_and(|peer| proxies.iter().any(|net| net.contains(&peer.ip())));
                if !trusted {
                    return Err(Problem::unauthenticated(
                        "identity headers are accepted from trusted proxies only",
                    ));
                }
                from_headers(req)
            }
        }
    }
}

#[derive(Deserialize)]
struct Claims {
    sub: serde_json::Value,
    #[serde(default)]
    role: Option<String>,
    /// Required by the validation; read again for the lifetime bound.
    exp: u64,
}

fn from_jwt(check: &JwtCheck, req: &HttpRequest) -> Result<Actor, Problem> {
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .ok_or_else(|| Problem::unauthenticated("missing Authorization header"))?;
    let token = header
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| Problem::unauthenticated("Authorization must be 'Bearer <JWT>'"))?;
    let claims = decode::<Claims>(token.trim(), &check.key, &check.validation)
        .map_err(|error| {
            // The library's reason stays in the log; the client learns only that it failed.
            tracing::debug!(error = %error, "token refused");
            Problem::unauthenticated("invalid or expired token")
        })?
        .claims;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if claims.exp > now.saturating_add(check.max_ttl.as_secs()) {
        return Err(Problem::unauthenticated(format!(
            "the token's lifetime is longer than {} s",
            check.max_ttl.as_secs()
        )));
    }
    let id = match &claims.sub {
        serde_json::Value::Number(n) => n.as_i64(),
        serde_json::Value::String(s) => s.parse().ok(),
        _ => None,
    };
    actor(id, claims.role.as_deref())
}

const USER_ID: (HeaderName, &str) = (HeaderName::from_static("x-user-id"), "X-User-Id");
const USER_ROLE: (HeaderName, &str) = (HeaderName::from_static("x-user-role"), "X-User-Role");

fn from_headers(req: &HttpRequest) -> Result<Actor, Problem> {
    // Looked up by a constant name: a `&str` name is parsed (and lower-cased) on every lookup.
    let header = |(key, name): &(HeaderName, &str)| -> Result<Option<&str>, Problem> {
        if req.headers().get_all(key).nth(1).is_some() {
            return Err(Problem::unauthenticated(format!(
                "{name} must be sent once"
            )));
        }
        req.headers()
            .get(key)
            .map(|v| {
                v.to_str()
                    .map_err(|_| Problem::unauthenticated(format!("{name} is not ASCII")))
            })
            .transpose()
    };
    let id =
        header(&USER_ID)?.ok_or_else(|| Problem::unauthenticated("missing X-User-Id header"))?;
    actor(id.trim().parse().ok(), header(&USER_ROLE)?)
}

fn actor(id: Option<i64>, role: Option<&str>) -> Result<Actor, Problem> {
    let user_id = id
        .and_then(|id| UserId::parse(id).ok())
        .ok_or_else(|| Problem::unauthenticated("the user id must be a positive integer"))?;
    let role = match role.map(str::trim) {
        None | Some("buyer") => Role::Buyer,
        Some("seller") => Role::Seller,
        Some("admin") => Role::Admin,
        Some(other) => return Err(Problem::unauthenticated(format!("unknown role {other:?}"))),
    };
    Ok(Actor { user_id, role })
}

/// The authenticated caller, extracted from the request (401 when missing or invalid).
pub struct Identity(pub Actor);

impl Identity {
    /// The caller, if a seller or an admin (403 otherwise).
    pub fn seller(&self) -> Result<Actor, Problem> {
        match self.0.role {
            Role::Seller | Role::Admin => Ok(self.0),
            Role::Buyer => Err(Problem::forbidden("this operation is for sellers")),
        }
    }

    /// The caller, if a buyer (403 otherwise).
    pub fn buyer(&self) -> Result<Actor, Problem> {
        match self.0.role {
            Role::Buyer => Ok(self.0),
            Role::Seller | Role::Admin => Err(Problem::forbidden("this operation is for buyers")),
        }
    }
}

/// A caller the rate limit's middleware already verified, so the route does not verify again.
#[derive(Clone, Copy)]
pub(crate) struct Verified(pub(crate) Actor);

impl FromRequest for Identity {
    type Error = actix_web::Error;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        if let Some(Verified(actor)) = req.extensions().get::<Verified>().copied() {
            return ready(Ok(Identity(actor)));
        }
        let result = match req.app_data::<web::Data<ApiState>>() {
            Some(state) => state.auth.identify(req).map(Identity),
            None => Err(Problem::unauthenticated("no identity configuration")),
        };
        if let Err(problem) = &result {
            crate::refusals::refused("unauthenticated", problem);
        }
        ready(result.map_err(Into::into))
    }
}
