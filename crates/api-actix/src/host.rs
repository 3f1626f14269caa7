//! DNS rebinding: in the embedded mode (SQLite, a loopback `BIND_ADDR`) the service trusts
//! whatever runs on this machine, and a web page elsewhere could make a browser here send it
//! requests under a name the page's owner controls. A request whose `Host` is not a loopback
//! name (`localhost`, `*.localhost`, `127.x.x.x`, `[::1]`) answers `421 MISDIRECTED_REQUEST`.

use crate::ApiState;
use crate::problem::Problem;
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::http::header::HOST;
use actix_web::middleware::Next;
use actix_web::{ResponseError as _, web};
use std::net::IpAddr;

/// Whether `host` (a `Host` header's value: a name or an address, and maybe a port) names this
/// machine's loopback interface.
pub fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [v6]:port
        match rest.split_once(']') {
            Some((v6, _)) => v6,
            None => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            Some(_) => return false,
            None => host,
        }
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The middleware: 421 for a foreign `Host` when the state asks for loopback names only.
pub async fn loopback_only(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let checked = req
        .app_data::<web::Data<ApiState>>()
        .is_some_and(|state| state.loopback_hosts_only);
    if checked {
        let host = req.headers().get(HOST).and_then(|v| v.to_str().ok());
        if !host.is_some_and(is_loopback_host) {
            let problem = Problem::new(
                StatusCode::MISDIRECTED_REQUEST,
                "MISDIRECTED_REQUEST",
                "Misdirected request",
                "this server answers loopback names only (localhost, 127.0.0.1, [::1])",
            );
            return Ok(req
                .into_response(problem.error_response())
                .map_into_right_body());
        }
    }
    next.call(req)
        .await
        .map(ServiceResponse::map_into_left_body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("localhost", true)]
    #[case("localhost:8080", true)]
    #[case("LOCALHOST.", true)]
    #[case("shop.localhost:8080", true)]
    #[case("127.0.0.1", true)]
    #[case("127.1.2.3:80", true)]
    #[case("[::1]:8080", true)]
    #[case("[::1]", true)]
    #[case("evil.example", false)]
    #[case("evil.example:8080", false)]
    #[case("localhost.evil.example", false)]
    #[case("127.0.0.1.nip.io", false)]
    #[case("10.0.0.1:8080", false)]
    #[case("[::2]:8080", false)]
    #[case("[::1", false)]
    #[case("localhost:port", false)]
    #[case("", false)]
    fn only_loopback_names_pass(#[case] host: &str, #[case] loopback: bool) {
        assert_eq!(is_loopback_host(host), loopback);
    }
}
