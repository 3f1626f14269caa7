//! `/admin/events`: the event log as CloudEvents (admins).

use crate::ApiState;
use crate::auth::Identity;
use crate::dto::EventPageBody;
use crate::problem::Problem;
use actix_web::{HttpRequest, HttpResponse, web};
use goods_app::ListEvents;
use goods_domain::EventType;
use serde::Deserialize;

/// `GET /admin/events` query parameters, as sent.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListQuery {
    after: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    drop_id: Option<String>,
    limit: Option<String>,
}

impl ListQuery {
    fn parse(self) -> Result<ListEvents, Problem> {
        let bad = |what: &str| Problem::malformed(what.to_owned());
        Ok(ListEvents {
            after: super::page_cursor(self.after, Ok)?,
            kind: self
                .kind
                .map(|raw| {
                    EventType::parse(&raw)
                        .ok_or_else(|| bad("type must be one of the event types in docs/events.md"))
                })
                .transpose()?,
            drop: super::query_drop(self.drop_id)?,
            limit: super::page_limit(self.limit, ListEvents::DEFAULT_LIMIT, ListEvents::MAX_LIMIT)?,
        })
    }
}

/// `GET /admin/events?after=&type=&dropId=&limit=` (admins): oldest first.
pub async fn list(
    state: web::Data<ApiState>,
    who: Identity,
    req: HttpRequest,
) -> Result<HttpResponse, Problem> {
    let query = super::admin_query::<ListQuery>(&who, &req, "events")?.parse()?;
    let page = state.app.events().list(who.0, query).await?;
    Ok(HttpResponse::Ok().json(EventPageBody::from(page)))
}
