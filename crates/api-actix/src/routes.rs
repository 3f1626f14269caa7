//! Route table.

mod admin;
mod drops;
mod events;
pub mod ops;
mod orders;
mod payments;
mod products;

use crate::problem::Problem;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};

/// A route's pattern, attached to its resource so metrics and traces label requests by it
/// without matching the path a second time.
#[derive(Debug, Clone, Copy)]
pub struct RouteLabel(pub &'static str);

/// The methods a resource allows, for the `Allow` header of its 405.
#[derive(Debug, Clone, Copy)]
struct Allow(&'static str);

/// Registers every route; anything else is a problem+json 404 (or 405 with `Allow` on a known
/// path).
pub fn configure(cfg: &mut web::ServiceConfig) {
    // actix tries routes in registration order, matching path parameters with a regex; the
    // purchase route takes nearly all the traffic of a drop, so it is tried first.
    cfg.service(
        web::resource("/limited-drops/{dropId}/orders")
            .app_data(Allow("POST"))
            .app_data(RouteLabel("/limited-drops/{dropId}/orders"))
            .post(drops::purchase)
            .default_service(web::to(method_not_allowed)),
    )
    .service(live())
    .service(
        web::resource("/limited-drops/{dropId}/entries")
            .app_data(Allow("POST"))
            .app_data(RouteLabel("/limited-drops/{dropId}/entries"))
            .post(drops::enter)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/limited-drops/{dropId}/entries/me")
            .app_data(Allow("GET"))
            .app_data(RouteLabel("/limited-drops/{dropId}/entries/me"))
            .get(drops::my_entry)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/limited-drops/{dropId}")
            .app_data(Allow("GET"))
            .app_data(RouteLabel("/limited-drops/{dropId}"))
            .get(drops::get)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/limited-drops")
            .app_data(Allow("POST"))
            .app_data(RouteLabel("/limited-drops"))
            .post(drops::create)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/limited-drops/{dropId}/pause")
            .app_data(Allow("POST"))
            .app_data(RouteLabel("/limited-drops/{dropId}/pause"))
            .post(drops::pause)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/limited-drops/{dropId}/resume")
            .app_data(Allow("POST"))
            .app_data(RouteLabel("/limited-drops/{dropId}/resume"))
            .post(drops::resume)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/limited-drops/{dropId}/close")
            .app_data(Allow("POST"))
            .app_data(RouteLabel("/limited-drops/{dropId}/close"))
            .post(drops::close)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/limited-drops/{dropId}/stats")
            .app_data(Allow("GET"))
            .app_data(RouteLabel("/limited-drops/{dropId}/stats"))
            .get(drops::stats)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/limited-drops/{dropId}/reconciliation")
            .app_data(Allow("GET"))
            .app_data(RouteLabel("/limited-drops/{dropId}/reconciliation"))
            .get(drops::reconciliation)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/products")
            .app_data(Allow("POST"))
            .app_data(RouteLabel("/products"))
            .post(products::create)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/products/{productId}")
            .app_data(Allow("GET"))
            .app_data(RouteLabel("/products/{productId}"))
            .get(products::get)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/orders/{orderId}")
            .app_data(Allow("GET"))
            .app_data(RouteLabel("/orders/{orderId}"))
            .get(orders::get)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/orders")
            .app_data(Allow("GET"))
            .app_data(RouteLabel("/orders"))
            .get(orders::list)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/payments/events")
            .app_data(Allow("POST"))
            .app_data(RouteLabel("/payments/events"))
            .post(payments::event)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/admin/events")
            .app_data(Allow("GET"))
            .app_data(RouteLabel("/admin/events"))
            .get(events::list)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/admin/payments")
            .app_data(Allow("GET"))
            .app_data(RouteLabel("/admin/payments"))
            .get(payments::list)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/orders/{orderId}/cancel")
            .app_data(Allow("POST"))
            .app_data(RouteLabel("/orders/{orderId}/cancel"))
            .post(orders::cancel)
            .default_service(web::to(method_not_allowed)),
    )
    .service(ready())
    .service(
        web::resource("/admin/flags")
            .app_data(Allow("GET"))
            .app_data(RouteLabel("/admin/flags"))
            .get(admin::flags)
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/admin/flags/{name}")
            .app_data(Allow("PUT"))
            .app_data(RouteLabel("/admin/flags/{name}"))
            .put(admin::set_flag)
            .default_service(web::to(method_not_allowed)),
    )
    .default_service(web::to(not_found));
}

fn live() -> actix_web::Resource {
    web::resource("/health/live")
        .app_data(Allow("GET"))
        .app_data(RouteLabel("/health/live"))
        .get(ops::live)
        .default_service(web::to(method_not_allowed))
}

fn ready() -> actix_web::Resource {
    web::resource("/health/ready")
        .app_data(Allow("GET"))
        .app_data(RouteLabel("/health/ready"))
        .get(ops::ready)
        .default_service(web::to(method_not_allowed))
}

/// The ops listener's routes: the probes and `/metrics`, for the scraper and the orchestrator
/// only (`OPS_BIND_ADDR`); the API listener answers 404 for `/metrics`.
pub fn configure_ops(cfg: &mut web::ServiceConfig) {
    cfg.service(live())
        .service(ready())
        .service(
            web::resource("/metrics")
                .app_data(Allow("GET"))
                .app_data(RouteLabel("/metrics"))
                .get(ops::metrics)
                .default_service(web::to(method_not_allowed)),
        )
        .default_service(web::to(not_found));
}

async fn not_found() -> Result<HttpResponse, Problem> {
    Err(Problem::not_found("NOT_FOUND", "no such resource"))
}

async fn method_not_allowed(req: actix_web::HttpRequest) -> HttpResponse {
    use actix_web::ResponseError as _;
    let allow = req.app_data::<Allow>().map_or("GET", |a| a.0);
    let mut res = Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
        "Method not allowed",
        format!("this resource allows {allow} only"),
    )
    .error_response();
    res.headers_mut().insert(
        actix_web::http::header::ALLOW,
        actix_web::http::header::HeaderValue::from_static(allow),
    );
    res
}

/// Parses a path id into a domain id; anything that is not a positive integer names no
/// resource, so it is a 404 with the resource's code.
fn path_id<T>(
    raw: &str,
    parse: fn(i64) -> Result<T, goods_domain::ValidationError>,
    code: &'static str,
) -> Result<T, Problem> {
    raw.parse::<i64>()
        .ok()
        .and_then(|id| parse(id).ok())
        .ok_or_else(|| Problem::not_found(code, format!("no resource with id {raw:?}")))
}

/// The largest integer JSON carries exactly: ids in a query are bounded by it.
pub(crate) const MAX_JSON_INTEGER: i64 = 9_007_199_254_740_991;

/// A query's id (`dropId`, a cursor) as sent: a whole number from 1 to 2^53 - 1, or `None`.
fn query_id(raw: &str) -> Option<i64> {
    raw.parse::<i64>()
        .ok()
        .filter(|id| (1..=MAX_JSON_INTEGER).contains(id))
}

/// A query's `dropId`, when sent.
fn query_drop(raw: Option<String>) -> Result<Option<goods_domain::DropId>, Problem> {
    raw.map(|raw| {
        query_id(&raw)
            .and_then(|id| goods_domain::DropId::parse(id).ok())
            .ok_or_else(|| Problem::malformed("dropId must be a whole number from 1 to 2^53 - 1"))
    })
    .transpose()
}

/// The query parameters of a listing for admins only: `FORBIDDEN` (naming `what`) for anyone
/// else, before the query is read.
fn admin_query<Q: serde::de::DeserializeOwned>(
    who: &crate::auth::Identity,
    req: &actix_web::HttpRequest,
    what: &str,
) -> Result<Q, Problem> {
    if who.0.role != goods_app::Role::Admin {
        return Err(Problem::forbidden(format!("{what} are for admins")));
    }
    web::Query::<Q>::from_query(req.query_string())
        .map(web::Query::into_inner)
        .map_err(|e| Problem::malformed(format!("bad query: {e}")))
}

/// A page's `cursor`: the `nextCursor` of an earlier page.
fn page_cursor<T>(
    raw: Option<String>,
    parse: fn(i64) -> Result<T, goods_domain::ValidationError>,
) -> Result<Option<T>, Problem> {
    raw.map(|raw| {
        query_id(&raw)
            .and_then(|id| parse(id).ok())
            .ok_or_else(|| Problem::malformed("cursor must be a nextCursor this API returned"))
    })
    .transpose()
}

/// A page's `limit`: `default` when absent, else a whole number from 1 to `max`.
fn page_limit(raw: Option<String>, default: u32, max: u32) -> Result<u32, Problem> {
    match raw {
        None => Ok(default),
        Some(raw) => raw
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                Problem::malformed(format!("limit must be a whole number from 1 to {max}"))
            }),
    }
}
