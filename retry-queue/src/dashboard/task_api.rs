//! The API of the task lists and of finding, opening and acting on chosen tasks (issue 23,
//! items 4–6): a page of a state (filtered or not), the kinds of a state, one task with its
//! payload and failure history, and an action on a batch of ids.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use retry_runtime::durable::{Error, Queue, TaskFilter, TaskState};
use retry_runtime::time::rfc3339;
use serde_json::Value;

use super::api::{
    Answer, ApiError, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Params, number_of, queue_of, state_of,
    with_stats,
};
use crate::json;
use crate::ops::{self, Action, MAX_BATCH};

/// `GET /api/queues/{queue}/kinds?state=S`: the kinds present in the state, sorted.
pub(crate) async fn kinds(
    State(base): State<Arc<Queue>>,
    path: Result<Path<String>, PathRejection>,
    params: Params,
) -> Answer {
    let Path(name) = path?;
    let Query(params) = params?;
    let queue = queue_of(&base, name)?;
    let state = state_of(&params, None)?;
    let kinds = queue
        .inspector()
        .kinds(state)
        .await
        .map_err(|e| ApiError::from_queue(e, &queue, None))?;
    Ok(Json(json::kinds(queue.name(), state, &kinds)))
}

/// `GET /api/queues/{queue}/tasks/{id}`: the task, payload and failure history included; 404
/// when the queue has no such task.
pub(crate) async fn task(
    State(base): State<Arc<Queue>>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Answer {
    let Path((name, id)) = path?;
    one(&base, name, &id).await
}

/// `GET /api/queues/{queue}/task?id=ID`: [`task`] with the id in the query, where a browser
/// leaves it as it is (it resolves a path segment `.` or `..`, even written `%2E`).
pub(crate) async fn task_by_query(
    State(base): State<Arc<Queue>>,
    path: Result<Path<String>, PathRejection>,
    params: Params,
) -> Answer {
    let Path(name) = path?;
    let Query(params) = params?;
    let Some(id) = params.get("id") else {
        return Err(ApiError::bad_request(
            "the query needs the task's id: ?id=ID (percent-encoded)",
        ));
    };
    one(&base, name, id).await
}

/// `GET /api/queues/{queue}/tasks/batch`: the task whose id is `batch` (the route of the same
/// name takes the POST of a batch).
pub(crate) async fn task_named_batch(
    State(base): State<Arc<Queue>>,
    path: Result<Path<String>, PathRejection>,
) -> Answer {
    let Path(name) = path?;
    one(&base, name, "batch").await
}

async fn one(base: &Queue, name: String, id: &str) -> Answer {
    let queue = queue_of(base, name)?;
    let info = queue
        .inspector()
        .get(id)
        .await
        .map_err(|e| ApiError::from_queue(e, &queue, Some(id)))?
        .ok_or_else(|| ApiError::from_queue(Error::TaskNotFound, &queue, Some(id)))?;
    let mut answer = json::task_with_actions(&info);
    // The queue clock's time, for the page's relative times and flags: one request a refresh.
    if let Value::Object(map) = &mut answer {
        map.insert("now".to_owned(), Value::String(rfc3339(queue.now())));
    }
    Ok(Json(answer))
}

/// `POST /api/queues/{queue}/tasks/batch` with `{"action": "run|delete|archive|cancel",
/// "ids": [id…]}` (1 to [`MAX_BATCH`] ids): `{"queue", "action", "done", "failed": [{"id",
/// "error"}…]}`. A task that refuses the action is listed in `failed` and the batch goes on;
/// a database failure stops it (503, saying how many were done).
pub(crate) async fn batch(
    State(base): State<Arc<Queue>>,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<Value>, JsonRejection>,
) -> Answer {
    let Path(name) = path?;
    let queue = queue_of(&base, name)?;
    let Json(body) = body.map_err(|e| {
        ApiError::bad_request(format!(
            "the body must be JSON {{\"action\": …, \"ids\": […]}}: {}",
            e.body_text()
        ))
    })?;
    let action = match body.get("action").and_then(Value::as_str) {
        Some(name) => Action::parse(name).ok_or_else(|| {
            ApiError::bad_request(format!(
                "unknown action {:?}: use run, delete, archive or cancel",
                ops::clean(name)
            ))
        })?,
        None => {
            return Err(ApiError::bad_request(
                "the body needs an action: \"run\", \"delete\", \"archive\" or \"cancel\"",
            ));
        }
    };
    let ids: Vec<String> = match body.get("ids").and_then(Value::as_array) {
        Some(ids) => ids
            .iter()
            .map(|id| id.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| ApiError::bad_request("ids must be an array of strings"))?,
        None => return Err(ApiError::bad_request("the body needs ids: [id…]")),
    };
    if ids.is_empty() || ids.len() > MAX_BATCH {
        return Err(ApiError::bad_request(format!(
            "a batch takes 1 to {MAX_BATCH} ids, got {}",
            ids.len()
        )));
    }
    let outcome = ops::batch(action, &queue.inspector(), &ids)
        .await
        .map_err(|(done, e)| {
            let failure = ApiError::from_queue(e, &queue, None);
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the batch stopped after {done} of {} tasks: {}",
                    ids.len(),
                    failure.message()
                ),
            )
        })?;
    Ok(Json(json::batch_done(queue.name(), action, &outcome)))
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
        let found = json::found(&found, total, state, kind, search);
        return with_stats(with_kinds(found, &params, &queue, state).await?, &queue).await;
    }
    let tasks = match params.get("after") {
        Some(after) => inspector.list_after(state, Some(after), size).await,
        None => inspector.page_number(state, page, size).await,
    }
    .map_err(fail)?;
    let total = inspector.count(state).await.map_err(fail)?;
    let page = json::page(&tasks.tasks, tasks.next.as_deref(), total, state);
    with_stats(with_kinds(page, &params, &queue, state).await?, &queue).await
}

/// `answer` with the kinds present in `state` under `"kinds"` when the query asks for them
/// (`&kinds=1`: the page's kind selector, in the same request as the tasks).
async fn with_kinds(
    mut answer: Value,
    params: &HashMap<String, String>,
    queue: &Queue,
    state: TaskState,
) -> Result<Value, ApiError> {
    if params.get("kinds").map(String::as_str) != Some("1") {
        return Ok(answer);
    }
    let kinds = queue
        .inspector()
        .kinds(state)
        .await
        .map_err(|e| ApiError::from_queue(e, queue, None))?;
    if let Value::Object(map) = &mut answer {
        map.insert("kinds".to_owned(), serde_json::json!(kinds));
    }
    Ok(answer)
}
