//! The handlers of the JSON API under `/api` (routes and answers: the [module docs](super#api)).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use retry_runtime::durable::{Error, Queue, TaskState};
use retry_runtime::time::rfc3339;
use serde_json::{Map, Value, json};

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

    /// 429 after many wrong tokens: `secs` until the next one is judged.
    pub(crate) fn too_many(secs: u64) -> ApiError {
        ApiError {
            retry_after: Some(secs),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "too many wrong tokens: the next one is checked in {secs} s \
                     (the right token is always accepted)"
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
        let mut response = (self.status, Json(json::error(&self.message))).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
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

/// `answer` with the queue's stats object (as in `GET /api/queues`) under `"stats"` and the
/// queue clock's time under `"now"`: a page of the dashboard refreshes with this one request.
pub(crate) async fn with_stats(mut answer: Value, queue: &Queue) -> Answer {
    let fail = |e| ApiError::from_queue(e, queue, None);
    let inspector = queue.inspector();
    let all = inspector.stats().await.map_err(fail)?;
    let workers = inspector.workers().await.map_err(fail)?;
    let serving = workers.iter().filter(|w| w.serves(queue.name())).count();
    let stats = match all.iter().find(|stats| stats.queue == queue.name()) {
        Some(stats) => json::queue(stats, serving),
        None => unused_queue(queue.name(), serving),
    };
    if let Value::Object(map) = &mut answer {
        map.insert("stats".to_owned(), stats);
        map.insert("now".to_owned(), json!(rfc3339(queue.now())));
    }
    Ok(Json(answer))
}

/// The stats object of a queue without tasks and not paused (which `stats` does not list).
fn unused_queue(name: &str, workers: usize) -> Value {
    let counts: Map<String, Value> = TaskState::ALL
        .into_iter()
        .map(|state| (state.as_str().to_owned(), json!(0)))
        .collect();
    json!({
        "queue": name, "counts": counts, "paused": false, "processed_today": 0,
        "failed_today": 0, "oldest_pending_age_secs": null, "workers": workers,
    })
}

/// `GET /api/queues/{queue}/errors?state=retry` (the default state), or
/// `…?states=retry,archived`: the groups of several states in one answer.
pub(crate) async fn errors(
    State(base): State<Arc<Queue>>,
    path: Result<Path<String>, PathRejection>,
    params: Params,
) -> Answer {
    let Path(name) = path?;
    let Query(params) = params?;
    let queue = queue_of(&base, name)?;
    let fail = |e| ApiError::from_queue(e, &queue, None);
    let Some(list) = params.get("states") else {
        let state = state_of(&params, Some(TaskState::Retry))?;
        let groups = queue.inspector().error_groups(state).await.map_err(fail)?;
        return with_stats(json::errors(queue.name(), state, &groups), &queue).await;
    };
    if params.contains_key("state") {
        return Err(ApiError::bad_request("give state or states, not both"));
    }
    let mut states = Vec::new();
    for name in list.split(',') {
        let state = name.parse::<TaskState>().map_err(|e| match e {
            Error::Invalid(why) => ApiError::bad_request(why),
            other => ApiError::bad_request(other.to_string()),
        })?;
        if states.contains(&state) {
            return Err(ApiError::bad_request(format!("states names {name} twice")));
        }
        states.push(state);
    }
    let mut answers = Vec::with_capacity(states.len());
    for state in states {
        let groups = queue.inspector().error_groups(state).await.map_err(fail)?;
        let mut one = json::errors(queue.name(), state, &groups);
        if let Value::Object(map) = &mut one {
            map.remove("queue");
        }
        answers.push(one);
    }
    let answer = json!({ "queue": queue.name(), "states": answers });
    with_stats(answer, &queue).await
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

/// `POST /api/queues/{queue}/task/run|delete|archive|cancel?id=ID`: the id in the query,
/// where a browser leaves it as it is (it resolves a path segment `.` or `..`, even written
/// `%2E`, before sending).
pub(crate) async fn task_action_by_query(
    action: Action,
    base: Arc<Queue>,
    path: Result<Path<String>, PathRejection>,
    params: Params,
) -> Answer {
    let Path(name) = path?;
    let Query(mut params) = params?;
    let Some(id) = params.remove("id") else {
        return Err(ApiError::bad_request(
            "the query needs the task's id: ?id=ID (percent-encoded)",
        ));
    };
    task_action(action, base, Ok(Path((name, id)))).await
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
