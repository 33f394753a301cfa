//! `ApiError`: every way a request can fail, and the one place that decides
//! its HTTP status, its stable `error` code, its message (the wording of the
//! domain errors it wraps included) and its headers.
//!
//! Codes are `SSSRR`: the HTTP status, then a two-digit reason. Clients may
//! rely on them; never reuse or renumber one.

use lambda_http::http::StatusCode;
use lambda_http::http::header::{ALLOW, HeaderName, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use serde::Serialize;

use crate::auth::AuthError;
use crate::plant::{BodyError, Bound, MAX_BODY_BYTES, PlantId};
use crate::store::StoreError;

/// The `error` code of [`ApiError::DeadlineExceeded`], which the metrics
/// count on their own (`DeadlineExceeded`).
pub const DEADLINE_EXCEEDED: u32 = 50302;

/// Seconds a client should wait before retrying a 503.
pub const RETRY_AFTER_SECONDS: u32 = 1;

#[derive(Debug)]
pub enum ApiError {
    NotFound,
    MethodNotAllowed,
    Auth(AuthError),
    PayloadTooLarge,
    UnsupportedMediaType,
    Body(BodyError),
    /// Why 409 and not 400: the request is valid, it only disagrees with
    /// what is already stored, and the stored plant wins.
    Conflict(PlantId),
    /// Worth a retry; the cause is for the log only.
    Unavailable(Box<dyn std::error::Error + Send + Sync>),
    /// The invocation's deadline came before the store (or the issuer)
    /// answered. The write may still land; a retry of the same create is
    /// idempotent, so the client can always retry.
    DeadlineExceeded(Waiting),
    /// Our fault; the cause is for the log only.
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

/// The contract's `Error` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorBody {
    pub error: u32,
    pub message: String,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Auth(AuthError::MissingCredentials | AuthError::InvalidToken) => StatusCode::UNAUTHORIZED,
            Self::Auth(AuthError::InsufficientScope { .. }) => StatusCode::FORBIDDEN,
            Self::Auth(AuthError::Unavailable) | Self::Unavailable(_) | Self::DeadlineExceeded(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Body(_) => StatusCode::BAD_REQUEST,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable `error` code.
    pub fn code(&self) -> u32 {
        match self {
            Self::Body(
                BodyError::Empty
                | BodyError::NotBase64
                | BodyError::NotJson(_)
                | BodyError::NotAnObject
                | BodyError::DuplicateField(_),
            ) => 40001,
            Self::Body(BodyError::MissingField(_)) => 40002,
            Self::Body(BodyError::WrongType { .. }) => 40003,
            Self::Body(BodyError::OutOfBounds { .. }) => 40004,
            Self::Body(BodyError::UnknownField(_)) => 40005,
            Self::Auth(AuthError::MissingCredentials) => 40101,
            Self::Auth(AuthError::InvalidToken) => 40102,
            Self::Auth(AuthError::InsufficientScope { .. }) => 40301,
            Self::NotFound => 40401,
            Self::MethodNotAllowed => 40501,
            Self::Conflict(_) => 40901,
            Self::PayloadTooLarge => 41301,
            Self::UnsupportedMediaType => 41501,
            Self::Internal(_) => 50001,
            Self::Auth(AuthError::Unavailable) | Self::Unavailable(_) => 50301,
            Self::DeadlineExceeded(_) => DEADLINE_EXCEEDED,
        }
    }

    /// What the client reads. Never includes an internal cause.
    pub fn message(&self) -> String {
        match self {
            Self::NotFound => "no such resource".to_owned(),
            Self::MethodNotAllowed => "method not allowed; use POST".to_owned(),
            Self::Auth(err) => err.to_string(),
            Self::PayloadTooLarge => format!("request body exceeds {MAX_BODY_BYTES} bytes"),
            Self::UnsupportedMediaType => "Content-Type must be application/json".to_owned(),
            Self::Body(err) => err.to_string(),
            Self::Conflict(id) => format!("a different plant with id {id} already exists"),
            Self::Unavailable(_) => "the store is temporarily unavailable; retry later".to_owned(),
            Self::DeadlineExceeded(_) => {
                "the request could not be completed in time; retry it (a retry of the same create is safe)"
                    .to_owned()
            }
            Self::Internal(_) => "internal error".to_owned(),
        }
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: self.code(),
            message: self.message(),
        }
    }

    /// Headers the status calls for: the RFC 6750 challenge on 401 and 403,
    /// `Allow` on 405, `Retry-After` on 503.
    pub fn headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        let challenge = |value: String| {
            HeaderValue::try_from(value)
                .ok()
                .map(|value| (WWW_AUTHENTICATE, value))
        };
        let header = match self {
            Self::Auth(AuthError::MissingCredentials) => challenge(r#"Bearer realm="plants""#.to_owned()),
            Self::Auth(AuthError::InvalidToken) => {
                challenge(r#"Bearer realm="plants", error="invalid_token""#.to_owned())
            }
            Self::Auth(AuthError::InsufficientScope { scope }) => challenge(format!(
                r#"Bearer realm="plants", error="insufficient_scope", scope="{scope}""#
            )),
            Self::MethodNotAllowed => Some((ALLOW, HeaderValue::from_static("POST"))),
            Self::Auth(AuthError::Unavailable) | Self::Unavailable(_) | Self::DeadlineExceeded(_) => {
                Some((RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS)))
            }
            _ => None,
        };
        header.into_iter().collect()
    }

    /// The internal cause of a 5xx, for the log.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync)> {
        match self {
            Self::Unavailable(cause) | Self::Internal(cause) => Some(cause.as_ref()),
            Self::DeadlineExceeded(waiting) => Some(waiting),
            _ => None,
        }
    }
}

/// What an invocation was waiting for when its deadline came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// The issuer's keys (a JWKS or discovery fetch).
    Issuer,
    /// DynamoDB (the `PutItem`, its retries included).
    Store,
}

impl std::fmt::Display for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Issuer => "the invocation's deadline came before the issuer's keys were fetched",
            Self::Store => "the invocation's deadline came before DynamoDB answered",
        })
    }
}

impl std::error::Error for Waiting {}

/// What a client reads of an authentication failure: never why a token
/// was refused.
impl std::fmt::Display for AuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::MissingCredentials => f.write_str("missing bearer token"),
            Self::InvalidToken => f.write_str("invalid bearer token"),
            Self::InsufficientScope { scope } => {
                write!(f, "token lacks the required scope `{scope}`")
            }
            Self::Unavailable => f.write_str("the token cannot be verified right now; retry later"),
        }
    }
}

impl std::error::Error for AuthError {}

/// What a client reads of a body that is not a valid `NewPlant`: the first
/// problem, naming its field and the bound it broke.
impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Empty => f.write_str("request body is empty"),
            Self::NotBase64 => f.write_str("request body is flagged isBase64Encoded but is not valid base64"),
            Self::NotJson(detail) => write!(f, "request body is not valid JSON: {detail}"),
            Self::NotAnObject => f.write_str("request body must be a JSON object"),
            Self::DuplicateField(field) => write!(f, "duplicate field `{field}`"),
            Self::UnknownField(field) => write!(f, "unknown field `{field}`"),
            Self::MissingField(field) => write!(f, "missing required field `{field}`"),
            Self::WrongType { field, expected } => write!(f, "field `{field}` must be {expected}"),
            Self::OutOfBounds { field, bound } => match bound {
                Bound::Int64 => write!(
                    f,
                    "field `{field}` must be an integer from {} to {}",
                    i64::MIN,
                    i64::MAX
                ),
                Bound::Length { max_chars } => {
                    write!(f, "field `{field}` must be 1 to {max_chars} characters")
                }
                Bound::NotOnlyWhitespace => write!(f, "field `{field}` must not be only whitespace"),
                Bound::NoControlCharacters => {
                    write!(f, "field `{field}` must not contain control characters")
                }
                Bound::UnpairedSurrogate => {
                    write!(f, "field `{field}` must not contain unpaired surrogate escapes")
                }
            },
        }
    }
}

impl std::error::Error for BodyError {}

impl From<AuthError> for ApiError {
    fn from(err: AuthError) -> Self {
        Self::Auth(err)
    }
}

impl From<BodyError> for ApiError {
    fn from(err: BodyError) -> Self {
        Self::Body(err)
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict(id) => Self::Conflict(id),
            StoreError::Unavailable(cause) => Self::Unavailable(cause),
            StoreError::Internal(cause) => Self::Internal(cause),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_client_told_to_retry_after_a_503_finds_the_issuers_keys_tried_again() {
        assert_eq!(
            Duration::from_secs(u64::from(RETRY_AFTER_SECONDS)),
            crate::auth::jwt::RETRY_INTERVAL
        );
    }
    use crate::plant::Bound;

    fn header(err: &ApiError, name: HeaderName) -> Option<String> {
        err.headers()
            .into_iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.to_str().unwrap().to_owned())
    }

    #[test]
    fn every_error_maps_to_its_status_and_catalogue_code() {
        let cases: Vec<(ApiError, u16, u32)> = vec![
            (BodyError::Empty.into(), 400, 40001),
            (BodyError::NotJson("x".into()).into(), 400, 40001),
            (BodyError::NotAnObject.into(), 400, 40001),
            (BodyError::DuplicateField("id".into()).into(), 400, 40001),
            (BodyError::MissingField("name").into(), 400, 40002),
            (
                BodyError::WrongType {
                    field: "id",
                    expected: "an integer",
                }
                .into(),
                400,
                40003,
            ),
            (
                BodyError::OutOfBounds {
                    field: "name",
                    bound: Bound::NotOnlyWhitespace,
                }
                .into(),
                400,
                40004,
            ),
            (BodyError::UnknownField("colour".into()).into(), 400, 40005),
            (AuthError::MissingCredentials.into(), 401, 40101),
            (AuthError::InvalidToken.into(), 401, 40102),
            (
                AuthError::InsufficientScope {
                    scope: "plants:write".into(),
                }
                .into(),
                403,
                40301,
            ),
            (AuthError::Unavailable.into(), 503, 50301),
            (ApiError::NotFound, 404, 40401),
            (ApiError::MethodNotAllowed, 405, 40501),
            (StoreError::Conflict(PlantId::from(4)).into(), 409, 40901),
            (ApiError::PayloadTooLarge, 413, 41301),
            (ApiError::UnsupportedMediaType, 415, 41501),
            (StoreError::Unavailable("timeout".into()).into(), 503, 50301),
            (ApiError::DeadlineExceeded(Waiting::Store), 503, 50302),
            (ApiError::DeadlineExceeded(Waiting::Issuer), 503, 50302),
            (StoreError::Internal("no table".into()).into(), 500, 50001),
        ];
        for (err, status, code) in cases {
            assert_eq!((err.status().as_u16(), err.code()), (status, code), "{err:?}");
            assert_eq!(
                err.code() / 100,
                u32::from(status),
                "code {code} must start with its status"
            );
        }
    }

    #[test]
    fn internal_causes_never_reach_the_message() {
        let internal = ApiError::from(StoreError::Internal(
            "ResourceNotFoundException: table plants".into(),
        ));
        let unavailable = ApiError::from(StoreError::Unavailable("dispatch failure at 10.0.0.1".into()));
        assert_eq!(
            internal.body(),
            ErrorBody {
                error: 50001,
                message: "internal error".into()
            }
        );
        assert_eq!(
            unavailable.message(),
            "the store is temporarily unavailable; retry later"
        );
        assert!(internal.cause().is_some() && unavailable.cause().is_some());
    }

    #[test]
    fn auth_failures_carry_rfc_6750_challenges() {
        assert_eq!(
            header(&AuthError::MissingCredentials.into(), WWW_AUTHENTICATE).as_deref(),
            Some(r#"Bearer realm="plants""#)
        );
        assert_eq!(
            header(&AuthError::InvalidToken.into(), WWW_AUTHENTICATE).as_deref(),
            Some(r#"Bearer realm="plants", error="invalid_token""#)
        );
        assert_eq!(
            header(
                &AuthError::InsufficientScope {
                    scope: "plants:write".into()
                }
                .into(),
                WWW_AUTHENTICATE
            )
            .as_deref(),
            Some(r#"Bearer realm="plants", error="insufficient_scope", scope="plants:write""#)
        );
    }

    #[test]
    fn method_and_availability_errors_carry_allow_and_retry_after() {
        assert_eq!(
            header(&ApiError::MethodNotAllowed, ALLOW).as_deref(),
            Some("POST")
        );
        let unavailable = ApiError::from(StoreError::Unavailable("throttled".into()));
        assert_eq!(header(&unavailable, RETRY_AFTER).as_deref(), Some("1"));
        let late = ApiError::DeadlineExceeded(Waiting::Store);
        assert_eq!(header(&late, RETRY_AFTER).as_deref(), Some("1"));
        assert!(ApiError::NotFound.headers().is_empty());
        assert!(ApiError::from(BodyError::Empty).headers().is_empty());
    }
}
