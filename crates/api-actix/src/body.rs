//! The one rule for request bodies (docs/api.md, "Bad input"), read through [`Body`] after
//! identity and role: not `application/json` (or `*+json`): 415; not the operation's JSON: 400
//! `MALFORMED_REQUEST` naming the `field`; out of range: 422 with the domain's `errors[]`.

use crate::problem::Problem;
use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_TYPE, HeaderValue};
use actix_web::{FromRequest, HttpRequest, mime, web};
use futures::future::LocalBoxFuture;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

/// A request's body and what it says it is, read by the rule only when the handler asks, after
/// identity and role (a buyer's bad body to a seller's route is 403, not 400).
#[derive(Debug)]
pub struct Body {
    bytes: web::Bytes,
    content_type: Option<HeaderValue>,
}

impl Body {
    /// The body as the operation's JSON: the media type first (415), then every field (400).
    ///
    /// # Errors
    /// 415 `UNSUPPORTED_MEDIA_TYPE` or 400 `MALFORMED_REQUEST`, as the module says.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, Problem> {
        media_type(self.content_type.as_ref())?;
        read(&self.bytes)
    }

    /// An operation that takes no fields: nothing at all (whatever the `Content-Type`), or a
    /// JSON `{}` read by the same rule as every other body.
    pub fn none(&self) -> Result<(), Problem> {
        if !self.bytes.iter().all(u8::is_ascii_whitespace) {
            let Empty {} = self.json()?;
        }
        Ok(())
    }

    /// An operation whose fields are all optional: nothing at all (whatever the
    /// `Content-Type`) is `T`'s default; anything else is read as [`json`](Self::json).
    ///
    /// # Errors
    /// As [`json`](Self::json), for a body that is not empty.
    pub fn json_or_default<T: DeserializeOwned + Default>(&self) -> Result<T, Problem> {
        if self.bytes.iter().all(u8::is_ascii_whitespace) {
            Ok(T::default())
        } else {
            self.json()
        }
    }

    /// The bytes as sent (the payment provider's signature covers them).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl FromRequest for Body {
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let bytes = web::Bytes::from_request(req, payload);
        let content_type = req.headers().get(CONTENT_TYPE).cloned();
        Box::pin(async move {
            Ok(Self {
                bytes: bytes.await?,
                content_type,
            })
        })
    }
}

/// The only JSON a body-less operation accepts.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

/// 415 unless the request says its body is JSON in UTF-8.
fn media_type(header: Option<&HeaderValue>) -> Result<(), Problem> {
    let Some(raw) = header.and_then(|v| v.to_str().ok()) else {
        return Err(unsupported(header.map_or(
            "the request has no Content-Type; send application/json".into(),
            |_| "the Content-Type header is not readable; send application/json".into(),
        )));
    };
    let mime: mime::Mime = raw.parse().map_err(|_| {
        unsupported(format!(
            "Content-Type {raw:?} is not a media type; send application/json"
        ))
    })?;
    let is_json = mime.type_() == mime::APPLICATION
        && (mime.subtype() == mime::JSON || mime.suffix() == Some(mime::JSON));
    if !is_json {
        return Err(unsupported(format!(
            "Content-Type {} is not JSON; send application/json",
            mime.essence_str()
        )));
    }
    match mime.get_param(mime::CHARSET) {
        Some(charset) if !charset.as_str().eq_ignore_ascii_case("utf-8") => Err(unsupported(
            format!("JSON is read in UTF-8 only, not charset={charset}"),
        )),
        _ => Ok(()),
    }
}

fn unsupported(detail: String) -> Problem {
    Problem::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "UNSUPPORTED_MEDIA_TYPE",
        "Unsupported media type",
        detail,
    )
}

/// Reads a JSON body into `T`, naming the field that could not be read.
///
/// # Errors
/// 400 `MALFORMED_REQUEST`, with `field` when one is to blame.
pub fn read<T: DeserializeOwned>(body: &[u8]) -> Result<T, Problem> {
    // serde reads a struct from an array of its fields in order too; every body is an object.
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return Err(Problem::malformed(
            "the body is not the operation's JSON: an object is expected, not an array",
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        // `.` is the body itself, `?` a place serde could not tell.
        let field = (path != "." && path != "?")
            .then_some(path)
            .or_else(|| named_field(&inner.to_string()));
        malformed(field, &inner)
    })?;
    de.end().map_err(|e| malformed(None, &e))?;
    Ok(value)
}

fn malformed(field: Option<String>, error: &serde_json::Error) -> Problem {
    match field {
        Some(field) => Problem::malformed(format!("{field}: {error}")).with("field", json!(field)),
        None => Problem::malformed(format!("the body is not the operation's JSON: {error}")),
    }
}

/// The field serde names in a missing- or unknown-field error of the object itself (its path is
/// the object's, not the field's): ``missing field `quantity` `` gives `quantity`.
fn named_field(message: &str) -> Option<String> {
    ["missing field `", "unknown field `"]
        .iter()
        .find_map(|prefix| message.strip_prefix(prefix))
        .and_then(|rest| rest.split('`').next())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;
    use serde_json::Value;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Input {
        quantity: i64,
        #[serde(default, with = "time::serde::rfc3339::option")]
        open_at: Option<time::OffsetDateTime>,
    }

    fn answer(content_type: Option<&str>, body: &str) -> (u16, String, Value) {
        let mut req = TestRequest::post();
        if let Some(content_type) = content_type {
            req = req.insert_header((CONTENT_TYPE, content_type));
        }
        let req = req.to_http_request();
        let body = Body {
            bytes: web::Bytes::copy_from_slice(body.as_bytes()),
            content_type: req.headers().get(CONTENT_TYPE).cloned(),
        };
        match body.json::<Input>() {
            Ok(input) => (
                200,
                format!(
                    "{} {:?}",
                    input.quantity,
                    input.open_at.map(|at| at.unix_timestamp())
                ),
                Value::Null,
            ),
            Err(problem) => {
                use actix_web::ResponseError as _;
                use actix_web::body::MessageBody as _;
                let res = problem.error_response();
                let status = res.status().as_u16();
                let body: Value =
                    serde_json::from_slice(&res.into_body().try_into_bytes().unwrap_or_default())
                        .unwrap_or_default();
                (
                    status,
                    body["code"].as_str().unwrap_or_default().to_owned(),
                    body,
                )
            }
        }
    }

    #[rstest::rstest]
    #[case(Some("application/json"), 200)]
    #[case(Some("application/json; charset=utf-8"), 200)]
    #[case(Some("Application/JSON; charset=UTF-8"), 200)]
    #[case(Some("application/merge-patch+json"), 200)]
    #[case(Some("application/problem+json"), 200)]
    #[case(None, 415)]
    #[case(Some("text/plain"), 415)]
    #[case(Some("text/json"), 415)]
    #[case(Some("application/x-www-form-urlencoded"), 415)]
    #[case(Some("application/jsonx"), 415)]
    #[case(Some("application/json; charset=latin1"), 415)]
    #[case(Some("json"), 415)]
    fn only_a_json_media_type_is_read(#[case] content_type: Option<&str>, #[case] status: u16) {
        let (got, code, _) = answer(content_type, r#"{"quantity": 1}"#);
        assert_eq!(got, status, "{content_type:?}");
        if status == 415 {
            assert_eq!(code, "UNSUPPORTED_MEDIA_TYPE");
        }
    }

    #[rstest::rstest]
    #[case(r#"{"quantity": "1"}"#, Some("quantity"))]
    #[case(r#"{"quantity": 1, "colour": "red"}"#, Some("colour"))]
    #[case(r#"{}"#, Some("quantity"))]
    #[case(r#"{"quantity": 1, "openAt": "tomorrow"}"#, Some("openAt"))]
    #[case(r#"{"quantity": 1, "openAt": 5}"#, Some("openAt"))]
    #[case(r#"{"quantity": 1"#, None)]
    #[case(r#"{"quantity": 1} {}"#, None)]
    #[case(r#"[1]"#, None)]
    #[case(r#" [{"quantity": 1}]"#, None)]
    #[case(r#"1"#, None)]
    #[case(r#"null"#, None)]
    #[case("", None)]
    fn an_unreadable_body_is_400_naming_its_field(#[case] body: &str, #[case] field: Option<&str>) {
        let (status, code, problem) = answer(Some("application/json"), body);
        assert_eq!(
            (status, code.as_str()),
            (400, "MALFORMED_REQUEST"),
            "{body}"
        );
        assert_eq!(problem["field"].as_str(), field, "{body}: {problem}");
        if let Some(field) = field {
            let detail = problem["detail"].as_str().unwrap_or_default();
            assert!(detail.starts_with(&format!("{field}: ")), "{detail}");
        }
    }

    #[test]
    fn a_readable_body_is_read_whole() {
        let (status, input, _) = answer(
            Some("application/json"),
            r#" {"quantity": -3, "openAt": "2026-12-01T09:00:00Z"} "#,
        );
        assert_eq!(status, 200);
        assert_eq!(input, "-3 Some(1796115600)");
    }
}
