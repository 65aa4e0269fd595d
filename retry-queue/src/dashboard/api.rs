//! The handlers of the JSON API under `/api` that act (one task, every task of a state, pause)
//! and the error groups; the routes and answers are in the [module docs](super#api) and the
//! OpenAPI document ([`openapi`](super::openapi)).

use axum::Json;
use axum::http::StatusCode;
use retry_runtime::durable::rfc3339;
use retry_runtime::durable::{Queue, TaskState};

use super::error::ApiError;
use super::params::{
    ActionOnly, ActionPath, ApiPath, ApiQuery, DeleteAllQuery, ErrorsQuery, IdQuery, RunAllQuery,
    Target,
};
use crate::json::{self, Acted, BulkDone, Errors, Paused, QueueJson, StateName};
use crate::ops::{Action, Bulk, running_ids};

/// The page size of `GET …/tasks` without `size`.
pub const DEFAULT_PAGE_SIZE: u32 = 20;
/// A larger `size` (up to 1 000, the most a request may ask) is cut to this.
pub const MAX_PAGE_SIZE: u32 = 100;

/// What a handler answers: its JSON, or an [`ApiError`].
pub(crate) type Answer<T> = Result<Json<T>, ApiError>;

/// The figures of `queue` (as in `GET /api/queues`: zero counts for a queue nobody used) and
/// the queue clock's time: a page of the dashboard refreshes with one request.
pub(crate) async fn stats_of(queue: &Queue) -> Result<(QueueJson, String), ApiError> {
    let fail = |e| ApiError::from_queue(e, queue, None);
    let inspector = queue.inspector();
    let all = inspector.stats().await.map_err(fail)?;
    let workers = inspector.workers().await.map_err(fail)?;
    let stats = match all.iter().find(|stats| stats.queue == queue.name()) {
        Some(stats) => {
            let due = crate::ops::next_due(queue).await.map_err(fail)?;
            let running = match stats.active {
                0 => 0,
                _ => running_ids(queue, &workers).await.map_err(fail)?.len(),
            };
            json::queue(stats, due, &workers, running)
        }
        None => json::unused_queue(queue.name(), &workers),
    };
    Ok((stats, rfc3339(queue.now())))
}

/// `GET /api/queues/{queue}/errors?state=retry` (the default state), or
/// `…?states=retry,archived`: the groups of several states in one answer (with `state` too:
/// the union, `state` first).
#[utoipa::path(get, path = "/api/queues/{queue}/errors", tag = "queues",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        super::params::QueueParam, ErrorsQuery),
    responses((status = 200, description = "The error groups", body = Errors)))]
pub(crate) async fn errors(
    Target(queue): Target,
    ApiQuery(query): ApiQuery<ErrorsQuery>,
) -> Answer<Errors> {
    let fail = |e| ApiError::from_queue(e, &queue, None);
    let inspector = queue.inspector();
    // `state` with `states`: their union, `state` first (the document allows the pair).
    let list = match (query.state, query.states) {
        (_, None) => None,
        (None, Some(list)) => Some(list.0),
        (Some(state), Some(mut list)) => {
            let state = TaskState::from(state);
            if !list.0.contains(&state) {
                list.0.insert(0, state);
            }
            Some(list.0)
        }
    };
    let mut answer = match list {
        None => {
            let state = query.state.map_or(TaskState::Retry, TaskState::from);
            let groups = inspector.error_groups(state).await.map_err(fail)?;
            json::errors(queue.name(), state, &groups)
        }
        Some(list) => {
            let mut states = Vec::with_capacity(list.len());
            for state in list {
                states.push((state, inspector.error_groups(state).await.map_err(fail)?));
            }
            json::errors_of_states(queue.name(), &states)
        }
    };
    let (stats, now) = stats_of(&queue).await?;
    answer.stats = Some(stats);
    answer.now = Some(now);
    Ok(Json(answer))
}

/// `POST /api/queues/{queue}/tasks/{id}/{action}`: `run`, `delete`, `archive` or `cancel`.
#[utoipa::path(post, path = "/api/queues/{queue}/tasks/{id}/{action}", tag = "tasks",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        ("id" = String, Path, description = "The task's id", example = "r1"),
        ("action" = Action, Path, description = "The action"), super::params::QueueParam),
    responses((status = 200, description = "The action was done", body = Acted)))]
pub(crate) async fn task_action(
    Target(queue): Target,
    ApiPath(ActionPath { id, action }): ApiPath<ActionPath>,
) -> Answer<Acted> {
    act(&queue, &id, action).await
}

async fn act(queue: &Queue, id: &str, action: Action) -> Answer<Acted> {
    action
        .apply(&queue.inspector(), id)
        .await
        .map_err(|e| ApiError::from_queue(e, queue, Some(id)))?;
    Ok(Json(json::acted(queue.name(), id, action)))
}

/// `POST /api/queues/{queue}/task/{action}?id=ID`: the id in the query, where a browser leaves
/// it as it is (it resolves a path segment `.` or `..`, even written `%2E`, before sending).
#[utoipa::path(post, path = "/api/queues/{queue}/task/{action}", tag = "tasks",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        ("action" = Action, Path, description = "The action"), IdQuery),
    responses((status = 200, description = "The action was done", body = Acted)))]
pub(crate) async fn task_action_by_query(
    Target(queue): Target,
    ApiPath(ActionOnly { action }): ApiPath<ActionOnly>,
    ApiQuery(query): ApiQuery<IdQuery>,
) -> Answer<Acted> {
    act(&queue, &query.id, action).await
}

async fn bulk(bulk: Bulk, queue: Queue, state: StateName) -> Answer<BulkDone> {
    let state = TaskState::from(state);
    let count = bulk
        .apply(&queue.inspector(), state)
        .await
        .map_err(|e| ApiError::from_queue(e, &queue, None))?;
    Ok(Json(json::bulk_done(queue.name(), state, count)))
}

/// `POST /api/queues/{queue}/run-all?state=…`: every task of the state made pending.
#[utoipa::path(post, path = "/api/queues/{queue}/run-all", tag = "queues",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        super::params::QueueParam, RunAllQuery),
    responses((status = 200, description = "How many tasks now wait", body = BulkDone)))]
pub(crate) async fn run_all(
    Target(queue): Target,
    ApiQuery(query): ApiQuery<RunAllQuery>,
) -> Answer<BulkDone> {
    bulk(Bulk::RunAll, queue, query.state).await
}

/// `POST /api/queues/{queue}/delete-all?state=…`: every task of the state deleted.
#[utoipa::path(post, path = "/api/queues/{queue}/delete-all", tag = "queues",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        super::params::QueueParam, DeleteAllQuery),
    responses((status = 200, description = "How many tasks were deleted", body = BulkDone)))]
pub(crate) async fn delete_all(
    Target(queue): Target,
    ApiQuery(query): ApiQuery<DeleteAllQuery>,
) -> Answer<BulkDone> {
    bulk(Bulk::DeleteAll, queue, query.state).await
}

async fn set_paused(queue: Queue, paused: bool) -> Answer<Paused> {
    if paused {
        queue.inspector().pause().await
    } else {
        queue.inspector().unpause().await
    }
    .map_err(|e| ApiError::from_queue(e, &queue, None))?;
    Ok(Json(json::paused(queue.name(), paused)))
}

/// `POST /api/queues/{queue}/pause`: workers claim nothing more from it.
#[utoipa::path(post, path = "/api/queues/{queue}/pause", tag = "queues",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        super::params::QueueParam),
    responses((status = 200, description = "Paused", body = Paused)))]
pub(crate) async fn pause(Target(queue): Target) -> Answer<Paused> {
    set_paused(queue, true).await
}

/// `POST /api/queues/{queue}/unpause`.
#[utoipa::path(post, path = "/api/queues/{queue}/unpause", tag = "queues",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        super::params::QueueParam),
    responses((status = 200, description = "Unpaused", body = Paused)))]
pub(crate) async fn unpause(Target(queue): Target) -> Answer<Paused> {
    set_paused(queue, false).await
}

/// Any other route: 404, as JSON.
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
