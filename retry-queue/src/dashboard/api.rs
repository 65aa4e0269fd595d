//! The handlers of the JSON API under `/api` (routes and answers: the [module docs](super#api)).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use retry_runtime::durable::{Error, Queue, TaskFilter, TaskState};
use serde_json::Value;

use crate::json;
use crate::ops::{Action, Bulk, Kind, Problem};

/// The page size of `GET …/tasks` without `size`.
pub const DEFAULT_PAGE_SIZE: u32 = 20;
/// A larger `size` is clamped to this.
pub const MAX_PAGE_SIZE: u32 = 100;

/// An answer `{"error": "…"}` with a 4xx or 5xx status.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
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
        let mut response = (self.status, Json(json::error(&self.message))).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

impl From<PathRejection> for ApiError {
    fn from(e: PathRejection) -> ApiError {
        ApiError::bad_request(format!("bad path: {}", e.body_text()))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(e: QueryRejection) -> ApiError {
        ApiError::bad_request(format!("bad query string: {}", e.body_text()))
    }
}

pub(crate) type Answer = Result<Json<Value>, ApiError>;
pub(crate) type Params = Result<Query<HashMap<String, String>>, QueryRejection>;

/// The queue named by a `{queue}` path segment (1 to 1 KiB: 400 otherwise).
pub(crate) fn queue_of(base: &Queue, name: String) -> Result<Queue, ApiError> {
    base.clone()
        .try_named(name)
        .map_err(|e| ApiError::from_queue(e, base, None))
}

/// The `state` parameter: required unless `default` is given; 400 when unknown.
pub(crate) fn state_of(
    params: &HashMap<String, String>,
    default: Option<TaskState>,
) -> Result<TaskState, ApiError> {
    match (params.get("state"), default) {
        (Some(state), _) => state.parse().map_err(|e: Error| match e {
            Error::Invalid(why) => ApiError::bad_request(why),
            other => ApiError::bad_request(other.to_string()),
        }),
        (None, Some(state)) => Ok(state),
        (None, None) => Err(ApiError::bad_request(
            "the query needs a state: ?state=pending|scheduled|active|retry|archived|completed",
        )),
    }
}

/// A positive number parameter, `default` when absent, at most `max` (larger ones are
/// clamped to it when `clamp`, refused otherwise).
pub(crate) fn number_of(
    params: &HashMap<String, String>,
    name: &str,
    default: u32,
    max: u32,
    clamp: bool,
) -> Result<u32, ApiError> {
    let Some(text) = params.get(name) else {
        return Ok(default);
    };
    let bad = || {
        ApiError::bad_request(format!(
            "{name} must be a whole number from 1 to {max}, got {text:?}"
        ))
    };
    // Digits only: `+1`, `1.0` and the like are refused; a size of any length is clamped.
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n = text.trim_start_matches('0');
    match n.parse::<u32>() {
        Ok(n) if n >= 1 && n <= max => Ok(n),
        _ if !n.is_empty() && clamp => Ok(max),
        _ => Err(bad()),
    }
}

/// `GET /api/queues`: every queue of the database, and the queue clock's time.
pub(crate) async fn queues(State(base): State<Arc<Queue>>) -> Answer {
    let stats = base
        .inspector()
        .stats()
        .await
        .map_err(|e| ApiError::from_queue(e, &base, None))?;
    Ok(Json(json::overview(base.now(), &stats)))
}

/// `GET /api/queues/{queue}/tasks?state=…&page=1&size=20`, or `…&after=CURSOR&size=20` (the
/// `next` of the page before: an index seek however deep); with `kind=K` and/or `search=TEXT`,
/// the tasks found ([`Inspector::find`](retry_runtime::durable::Inspector::find)), paged by
/// cursor only.
pub(crate) async fn tasks(
    State(base): State<Arc<Queue>>,
    path: Result<Path<String>, PathRejection>,
    params: Params,
) -> Answer {
    let Path(name) = path?;
    let Query(params) = params?;
    let queue = queue_of(&base, name)?;
    let state = state_of(&params, None)?;
    let page = number_of(&params, "page", 1, u32::MAX, false)?;
    let size = number_of(&params, "size", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, true)?;
    let fail = |e| ApiError::from_queue(e, &queue, None);
    let inspector = queue.inspector();
    if params.contains_key("after") && params.contains_key("page") {
        return Err(ApiError::bad_request(
            "give page or after, not both: after (the next of a page) already says where",
        ));
    }
    let kind = params
        .get("kind")
        .map(String::as_str)
        .filter(|k| !k.is_empty());
    let search = params
        .get("search")
        .map(String::as_str)
        .filter(|s| !s.is_empty());
    if kind.is_some() || search.is_some() {
        if params.contains_key("page") {
            return Err(ApiError::bad_request(
                "a filtered list (kind, search) pages by cursor: give after (the next of the \
                 page before), not page",
            ));
        }
        let mut filter = TaskFilter::default();
        filter.kind = kind.map(str::to_owned);
        filter.search = search.map(str::to_owned);
        let after = params.get("after").map(String::as_str);
        let found = inspector
            .find(state, &filter, after, size)
            .await
            .map_err(fail)?;
        let total = inspector.count(state).await.map_err(fail)?;
        return Ok(Json(json::found(&found, total, state, kind, search)));
    }
    let tasks = match params.get("after") {
        Some(after) => inspector.list_after(state, Some(after), size).await,
        None => inspector.page_number(state, page, size).await,
    }
    .map_err(fail)?;
    let total = inspector.count(state).await.map_err(fail)?;
    Ok(Json(json::page(
        &tasks.tasks,
        tasks.next.as_deref(),
        total,
        state,
    )))
}

/// `GET /api/queues/{queue}/errors?state=retry` (the default state).
pub(crate) async fn errors(
    State(base): State<Arc<Queue>>,
    path: Result<Path<String>, PathRejection>,
    params: Params,
) -> Answer {
    let Path(name) = path?;
    let Query(params) = params?;
    let queue = queue_of(&base, name)?;
    let state = state_of(&params, Some(TaskState::Retry))?;
    let groups = queue
        .inspector()
        .error_groups(state)
        .await
        .map_err(|e| ApiError::from_queue(e, &queue, None))?;
    Ok(Json(json::errors(queue.name(), state, &groups)))
}

/// `POST /api/queues/{queue}/tasks/{id}/run|delete|archive`.
pub(crate) async fn task_action(
    action: Action,
    base: Arc<Queue>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Answer {
    let Path((name, id)) = path?;
    let queue = queue_of(&base, name)?;
    action
        .apply(&queue.inspector(), &id)
        .await
        .map_err(|e| ApiError::from_queue(e, &queue, Some(&id)))?;
    Ok(Json(json::acted(queue.name(), &id, action)))
}

/// `POST /api/queues/{queue}/run-all?state=…` and `POST /api/queues/{queue}/delete-all?state=…`:
/// the state is required.
pub(crate) async fn bulk(
    bulk: Bulk,
    base: Arc<Queue>,
    path: Result<Path<String>, PathRejection>,
    params: Params,
) -> Answer {
    let Path(name) = path?;
    let Query(params) = params?;
    let queue = queue_of(&base, name)?;
    let state = state_of(&params, None)?;
    let count = bulk
        .apply(&queue.inspector(), state)
        .await
        .map_err(|e| ApiError::from_queue(e, &queue, None))?;
    Ok(Json(json::bulk_done(queue.name(), state, count)))
}

/// `POST /api/queues/{queue}/pause` (`true`) and `…/unpause` (`false`).
pub(crate) async fn set_paused(
    paused: bool,
    base: Arc<Queue>,
    path: Result<Path<String>, PathRejection>,
) -> Answer {
    let Path(name) = path?;
    let queue = queue_of(&base, name)?;
    if paused {
        queue.inspector().pause().await
    } else {
        queue.inspector().unpause().await
    }
    .map_err(|e| ApiError::from_queue(e, &queue, None))?;
    Ok(Json(json::paused(queue.name(), paused)))
}

/// Any other route: 404 (or 405 for a known route with another method), as JSON.
pub(crate) async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such route")
}

/// A known route asked with the wrong method.
pub(crate) async fn wrong_method() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "wrong method: reads are GET, actions are POST",
    )
}
