//! The one error type of the dashboard and its one mapping to answers: every refusal and
//! failure is an [`ApiError`], answered `{"error": "…"}` with its status (and the security
//! headers the guard adds to every answer).

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use retry_runtime::durable::{Error, Queue};

use crate::json::ErrorBody;
use crate::ops::{Kind, Problem, clean};

/// An answer `{"error": "…"}` with a 4xx or 5xx status.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
    /// `Retry-After` (seconds) of a 429.
    retry_after: Option<u64>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 429 while this client's address is locked out after many wrong tokens: `secs` until
    /// its next request is judged.
    pub(crate) fn too_many(secs: u64) -> ApiError {
        ApiError {
            retry_after: Some(secs),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "too many wrong tokens from this address: every request from it is refused \
                     for {secs} s more"
                ),
            )
        }
    }

    /// The text the answer carries.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "this dashboard needs its token: send `Authorization: Bearer <token>`",
        )
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// A failure of the inspector, for the task `id` when the call was about one: the
    /// [`Problem`]'s text, with its kind's status.
    pub(crate) fn from_queue(e: Error, queue: &Queue, id: Option<&str>) -> ApiError {
        let problem = Problem::of(e, queue.name(), id);
        let status = match problem.kind {
            Kind::NotFound => StatusCode::NOT_FOUND,
            Kind::Active => StatusCode::CONFLICT,
            Kind::Invalid => StatusCode::BAD_REQUEST,
            Kind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, problem.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.message,
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

impl From<PathRejection> for ApiError {
    fn from(e: PathRejection) -> ApiError {
        ApiError::bad_request(format!("bad path: {}", clean(&e.body_text())))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(e: QueryRejection) -> ApiError {
        ApiError::bad_request(format!("bad query string: {}", clean(&e.body_text())))
    }
}

impl From<JsonRejection> for ApiError {
    fn from(e: JsonRejection) -> ApiError {
        let status = match e.status() {
            StatusCode::PAYLOAD_TOO_LARGE => StatusCode::PAYLOAD_TOO_LARGE,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(
            status,
            format!(
                "the body must be JSON {{\"action\": …, \"ids\": […]}}: {}",
                clean(&e.body_text())
            ),
        )
    }
}
