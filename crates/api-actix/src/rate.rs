//! `RATE_LIMIT_PER_IP`, before any route: unverified requests count per client address (the
//! peer, or behind `AUTH_TRUSTED_PROXIES` the last untrusted `X-Forwarded-For`), verified
//! reads per caller. Buyers' writes count in their routes; `/health/*` never counts.

use crate::ApiState;
use crate::auth::Verified;
use crate::problem::Problem;
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::http::header::{AUTHORIZATION, HeaderMap, HeaderName};
use actix_web::middleware::Next;
use actix_web::{HttpMessage as _, ResponseError as _, web};
use ipnet::IpNet;
use std::net::IpAddr;

const FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const USER_ID: HeaderName = HeaderName::from_static("x-user-id");

/// Whether the request names a caller (a token or identity headers), to be verified.
fn has_identity(headers: &HeaderMap) -> bool {
    headers.contains_key(AUTHORIZATION) || headers.contains_key(USER_ID)
}

/// The client's address: the peer, or what trusted proxies say the peer forwarded for.
pub fn client_address(
    peer: Option<IpAddr>,
    headers: &HeaderMap,
    forwarders: &[IpNet],
) -> Option<IpAddr> {
    let peer = peer?;
    let trusted = |ip: &IpAddr| forwarders.iter().any(|net| net.contains(ip));
    if !trusted(&peer) {
        return Some(peer);
    }
    // Each proxy appends the address it received from: read from the right, the first
    // address no trusted proxy owns is the client. A value that does not parse stops there.
    let mut client = peer;
    for value in headers.get_all(FORWARDED_FOR).rev() {
        let Ok(value) = value.to_str() else {
            return Some(client);
        };
        for hop in value.rsplit(',') {
            let Ok(ip) = hop.trim().parse::<IpAddr>() else {
                return Some(client);
            };
            client = ip;
            if !trusted(&ip) {
                return Some(ip);
            }
        }
    }
    Some(client)
}

/// The middleware: 429 `RATE_LIMITED` for an address or a reader over its bucket, before any
/// route. The identity it verifies is kept on the request for the route.
pub async fn anonymous(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    if let Some(state) = req.app_data::<web::Data<ApiState>>().cloned()
        && !req.path().starts_with("/health/")
    {
        let verified = if has_identity(req.headers()) {
            state.auth.identify(req.request()).ok()
        } else {
            None
        };
        let counted = match verified {
            Some(actor) => {
                req.extensions_mut().insert(Verified(actor));
                match *req.method() {
                    Method::GET | Method::HEAD => state.app.limit_reader(actor.user_id).await,
                    _ => Ok(()),
                }
            }
            None => match client_address(
                req.peer_addr().map(|a| a.ip()),
                req.headers(),
                &state.forwarders,
            ) {
                Some(client) => state.app.limit_address(client).await,
                None => Ok(()),
            },
        };
        if let Err(limited) = counted {
            let response = Problem::rate_limited(&limited).error_response();
            return Ok(req.into_response(response).map_into_right_body());
        }
    }
    next.call(req)
        .await
        .map(ServiceResponse::map_into_left_body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::header::HeaderValue;
    use rstest::rstest;

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    #[rstest]
    #[case::a_direct_client("203.0.113.9", &[], &[], "203.0.113.9")]
    #[case::forwarded_by_an_untrusted_peer("203.0.113.9", &["198.51.100.1"], &[], "203.0.113.9")]
    #[case::forwarded_by_the_balancer("10.0.0.2", &["198.51.100.1"], &["10.0.0.0/8"], "198.51.100.1")]
    #[case::a_client_forging_hops_before_the_balancer("10.0.0.2", &["1.1.1.1, 198.51.100.1"], &["10.0.0.0/8"], "198.51.100.1")]
    #[case::two_trusted_proxies("10.0.0.2", &["198.51.100.1, 10.0.0.3"], &["10.0.0.0/8"], "198.51.100.1")]
    #[case::in_two_header_lines("10.0.0.2", &["198.51.100.1", "10.0.0.3"], &["10.0.0.0/8"], "198.51.100.1")]
    #[case::garbage_stops_at_the_last_trusted_hop("10.0.0.2", &["junk, 10.0.0.3"], &["10.0.0.0/8"], "10.0.0.3")]
    #[case::no_header_from_the_balancer("10.0.0.2", &[], &["10.0.0.0/8"], "10.0.0.2")]
    fn the_client_is_the_last_address_no_trusted_proxy_owns(
        #[case] peer: &str,
        #[case] forwarded: &[&str],
        #[case] trusted: &[&str],
        #[case] client: &str,
    ) {
        let mut headers = HeaderMap::new();
        for value in forwarded {
            headers.append(FORWARDED_FOR, HeaderValue::from_str(value).unwrap());
        }
        assert_eq!(
            client_address(Some(peer.parse().unwrap()), &headers, &nets(trusted)),
            Some(client.parse().unwrap())
        );
    }
}
