//! A bound on the whole request, body included: past [`REQUEST_TIMEOUT`] the handler is dropped
//! (its transaction rolls back) and the client gets 503 with `Retry-After`. A purchase's own
//! waits bound it well below.

use crate::problem::Problem;
use std::time::Duration;

/// How long one request may take, from its head to its answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// The answer to a request that took longer than [`REQUEST_TIMEOUT`] (the request-id middleware
/// enforces it).
pub fn too_long() -> actix_web::Error {
    tracing::warn!(
        timeout_ms = REQUEST_TIMEOUT.as_millis(),
        "request took too long; answered 503"
    );
    Problem::new(
        actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
        "SERVICE_UNAVAILABLE",
        "Service unavailable",
        "the request took too long; retry with the same Idempotency-Key",
    )
    .retry_after(1)
    .into()
}

#[cfg(test)]
mod tests {
    use actix_web::{App, HttpResponse, test, web};

    async fn stuck() -> HttpResponse {
        tokio::time::sleep(super::REQUEST_TIMEOUT * 4).await;
        HttpResponse::Ok().finish()
    }

    #[actix_web::test]
    async fn a_request_past_the_bound_is_answered_503_with_retry_after() {
        tokio::time::pause();
        let app = test::init_service(
            App::new()
                .wrap(actix_web::middleware::from_fn(
                    crate::request_id::middleware,
                ))
                .route("/stuck", web::get().to(stuck)),
        )
        .await;
        let req = test::TestRequest::get().uri("/stuck").to_request();
        let Err(error) = test::try_call_service(&app, req).await else {
            panic!("a stuck request must be cut off");
        };
        let res = error.error_response();
        assert_eq!(res.status().as_u16(), 503);
        assert_eq!(res.headers().get("retry-after").unwrap(), "1");
    }
}
