//! Route table.

mod admin;
mod drops;
mod events;
pub mod ops;
mod orders;
mod payments;
mod products;
mod webhooks;

use crate::problem::Problem;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};

/// A route's pattern, attached to its resource so metrics and traces label requests by it
/// without matching the path a second time.
#[derive(Debug, Clone, Copy)]
pub struct RouteLabel(pub &'static str);

/// The method a resource allows: its route, and its name for the `Allow` header of a 405.
#[derive(Debug, Clone, Copy)]
enum Verb {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Verb {
    fn name(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
        }
    }

    fn route(self) -> actix_web::Route {
        match self {
            Self::Get => web::get(),
            Self::Post => web::post(),
            Self::Put => web::put(),
            Self::Patch => web::patch(),
            Self::Delete => web::delete(),
        }
    }
}

use Verb::{Delete, Get, Patch, Post, Put};

/// The methods a resource allows, for the `Allow` header of its 405.
#[derive(Debug, Clone, Copy)]
struct Allow(&'static str);

/// The resource at `path` answering `verb` with `handler`, labelled by `path` for metrics and
/// traces; any other method is a 405 naming `verb`.
fn route<F, Args>(verb: Verb, path: &'static str, handler: F) -> actix_web::Resource
where
    F: actix_web::Handler<Args>,
    Args: actix_web::FromRequest + 'static,
    F::Output: actix_web::Responder + 'static,
{
    resource(path, verb.name()).route(verb.route().to(handler))
}

/// The resource at `path`, labelled by it, answering a method it does not `allow` (their
/// names, comma-separated) with a 405; its routes are added by the caller.
fn resource(path: &'static str, allow: &'static str) -> actix_web::Resource {
    web::resource(path)
        .app_data(Allow(allow))
        .app_data(RouteLabel(path))
        .default_service(web::to(method_not_allowed))
}

/// `cfg` with one resource answering several methods: `"path", "GET, POST", Verb => handler, …`.
macro_rules! resource {
    ($cfg:expr, $path:literal, $allow:literal, $($verb:ident => $handler:path),+ $(,)?) => {
        $cfg.service(resource($path, $allow)$(.route($verb.route().to($handler)))+)
    };
}

/// `cfg` with one [`route`] a line: `Verb "path" => handler,`.
macro_rules! routes {
    ($cfg:expr, $($verb:ident $path:literal => $handler:path,)*) => {
        $cfg$(.service(route($verb, $path, $handler)))*
    };
}

/// Registers every route; anything else is a problem+json 404 (or 405 with `Allow` on a known
/// path). actix tries routes in registration order, matching path parameters with a regex; the
/// purchase route takes nearly all the traffic of a drop, so it is tried first.
pub fn configure(cfg: &mut web::ServiceConfig) {
    routes!(cfg,
        Post "/limited-drops/{dropId}/orders" => drops::purchase,
        Get "/health/live" => ops::live,
        Post "/limited-drops/{dropId}/entries" => drops::enter,
        Get "/limited-drops/{dropId}/entries/me" => drops::my_entry,
        Get "/limited-drops/{dropId}" => drops::get,
        Post "/limited-drops" => drops::create,
        Post "/limited-drops/{dropId}/pause" => drops::pause,
        Post "/limited-drops/{dropId}/resume" => drops::resume,
        Post "/limited-drops/{dropId}/close" => drops::close,
        Get "/limited-drops/{dropId}/stats" => drops::stats,
        Get "/limited-drops/{dropId}/reconciliation" => drops::reconciliation,
        Post "/products" => products::create,
        Get "/products/{productId}" => products::get,
        Get "/orders/{orderId}" => orders::get,
        Get "/orders" => orders::list,
        Post "/payments/events" => payments::event,
        Get "/admin/events" => events::list,
        Get "/admin/payments" => payments::list,
        Post "/orders/{orderId}/cancel" => orders::cancel,
        Get "/health/ready" => ops::ready,
        Get "/admin/flags" => admin::flags,
        Put "/admin/flags/{name}" => admin::set_flag,
        Post "/webhook-endpoints/{endpointId}/rotate-secret" => webhooks::rotate,
        Get "/webhook-endpoints/{endpointId}/deliveries" => webhooks::deliveries,
        Post "/webhook-endpoints/{endpointId}/deliveries/{eventId}/retry" => webhooks::retry,
    );
    resource!(cfg, "/webhook-endpoints", "GET, POST",
        Get => webhooks::list,
        Post => webhooks::create,
    );
    resource!(cfg, "/webhook-endpoints/{endpointId}", "GET, PATCH, DELETE",
        Get => webhooks::get,
        Patch => webhooks::update,
        Delete => webhooks::delete,
    );
    cfg.default_service(web::to(not_found));
}

/// The ops listener's routes: the probes and `/metrics`, for the scraper and the orchestrator
/// only (`OPS_BIND_ADDR`); the API listener answers 404 for `/metrics`.
pub fn configure_ops(cfg: &mut web::ServiceConfig) {
    routes!(cfg,
        Get "/health/live" => ops::live,
        Get "/health/ready" => ops::ready,
        Get "/metrics" => ops::metrics,
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
