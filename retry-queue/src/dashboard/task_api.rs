//! The API of finding, opening and acting on chosen tasks (issue 23, items 4–6): the kinds of a
//! state, one task with its payload and failure history, and an action on a batch of ids.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use retry_runtime::durable::{Error, Queue};
use serde_json::Value;

use super::api::{Answer, ApiError, Params, queue_of, state_of};
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
    Ok(Json(json::task_with_actions(&info)))
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
