//! A handler's panic becomes `500 INTERNAL` with the request id (caught in `request_id.rs`),
//! and the worker goes on: the net under what input parsing missed.

use crate::problem::Problem;
use serde_json::json;
use std::any::Any;

/// The answer to a handler that panicked with `panic` while serving request `id`.
pub fn internal(panic: &(dyn Any + Send), id: &str) -> actix_web::Error {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    tracing::error!(panic = %message, request.id = %id, "handler panicked");
    Problem::new(
        actix_web::http::StatusCode::INTERNAL_SERVER_ERROR,
        "INTERNAL",
        "Internal error",
        "the request could not be completed; it changed nothing that was not committed",
    )
    .with("requestId", json!(id))
    .into()
}

#[cfg(test)]
mod tests {
    use actix_web::{App, HttpResponse, test, web};

    async fn boom() -> HttpResponse {
        panic!("simulated fault in a handler")
    }

    #[actix_web::test]
    async fn a_panicking_handler_answers_500_with_the_request_id_and_the_next_request_is_served() {
        let app = test::init_service(
            App::new()
                .wrap(actix_web::middleware::from_fn(
                    crate::request_id::middleware,
                ))
                .route("/boom", web::get().to(boom))
                .route("/fine", web::get().to(|| async { "fine" })),
        )
        .await;
        let req = test::TestRequest::get()
            .uri("/boom")
            .insert_header(("X-Request-Id", "req-42"))
            .to_request();
        let Err(error) = test::try_call_service(&app, req).await else {
            panic!("a panic must become an error response");
        };
        // What the server sends for it.
        let res = error.error_response();
        assert_eq!(res.status().as_u16(), 500);
        assert_eq!(
            res.headers().get("content-type").unwrap(),
            "application/problem+json"
        );
        let body = actix_web::body::to_bytes(res.into_body()).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            (body["code"].as_str(), body["requestId"].as_str()),
            (Some("INTERNAL"), Some("req-42"))
        );
        let res =
            test::call_service(&app, test::TestRequest::get().uri("/fine").to_request()).await;
        assert_eq!(res.status().as_u16(), 200);
    }
}
