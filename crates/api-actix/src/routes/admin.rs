//! `/admin/flags`: runtime feature flags (admins only).

use crate::ApiState;
use crate::auth::Identity;
use crate::body::Body;
use crate::dto::{FlagBody, SetFlag};
use crate::problem::Problem;
use actix_web::{HttpResponse, web};

/// `GET /admin/flags`.
pub async fn flags(state: web::Data<ApiState>, who: Identity) -> Result<HttpResponse, Problem> {
    let flags = state.app.flags().list(who.0).await?;
    Ok(HttpResponse::Ok().json(flags.into_iter().map(FlagBody::from).collect::<Vec<_>>()))
}

/// `PUT /admin/flags/{name}` with `{"enabled": bool}`.
pub async fn set_flag(
    state: web::Data<ApiState>,
    who: Identity,
    name: web::Path<String>,
    body: Body,
) -> Result<HttpResponse, Problem> {
    // Who may, before what: a non-admin learns nothing about flag names or bodies.
    if who.0.role != goods_app::Role::Admin {
        return Err(Problem::forbidden("flags are for admins"));
    }
    let input: SetFlag = body.json()?;
    let flag = state.app.flags().set(&name, input.enabled, who.0).await?;
    Ok(HttpResponse::Ok().json(FlagBody::from(flag)))
}
