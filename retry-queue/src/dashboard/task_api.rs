//! The API of the task lists and of finding, opening and acting on chosen tasks: a page of a
//! state (filtered or not), the kinds of a state, one task with its payload and failure
//! history, and an action on a batch of ids.

use axum::Json;
use axum::http::StatusCode;
use retry_runtime::durable::rfc3339;
use retry_runtime::durable::{Cursor, Error, Queue, TaskQuery, TaskState};

use super::api::{Answer, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, stats_of};
use super::error::ApiError;
use super::params::{
    ApiJson, ApiPath, ApiQuery, BatchBody, Flag, IdPath, IdQuery, StateQuery, Target, TasksQuery,
};
use crate::json::{self, BatchDone, Kinds, TaskAnswer, TasksPage};
use crate::ops::{self, MAX_BATCH, running_ids};

/// `GET /api/queues/{queue}/kinds?state=S`: the kinds present in the state, sorted.
#[utoipa::path(get, path = "/api/queues/{queue}/kinds", tag = "tasks",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        super::params::QueueParam, StateQuery),
    responses((status = 200, description = "The kinds, at most 200", body = Kinds)))]
pub(crate) async fn kinds(
    Target(queue): Target,
    ApiQuery(query): ApiQuery<StateQuery>,
) -> Answer<Kinds> {
    let state = TaskState::from(query.state);
    let kinds = queue
        .inspector()
        .kinds(state)
        .await
        .map_err(|e| ApiError::from_queue(e, &queue, None))?;
    Ok(Json(json::kinds(queue.name(), state, &kinds)))
}

/// `GET /api/queues/{queue}/tasks/{id}`: the task, payload and failure history included; 404
/// when the queue has no such task.
#[utoipa::path(get, path = "/api/queues/{queue}/tasks/{id}", tag = "tasks",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        ("id" = String, Path, description = "The task's id", example = "r1"), super::params::QueueParam),
    responses((status = 200, description = "The task", body = TaskAnswer)))]
pub(crate) async fn task(
    Target(queue): Target,
    ApiPath(IdPath { id }): ApiPath<IdPath>,
) -> Answer<TaskAnswer> {
    one(&queue, &id).await
}

/// `GET /api/queues/{queue}/task?id=ID`: [`task`] with the id in the query, where a browser
/// leaves it as it is (it resolves a path segment `.` or `..`, even written `%2E`).
#[utoipa::path(get, path = "/api/queues/{queue}/task", tag = "tasks",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        IdQuery),
    responses((status = 200, description = "The task", body = TaskAnswer)))]
pub(crate) async fn task_by_query(
    Target(queue): Target,
    ApiQuery(query): ApiQuery<IdQuery>,
) -> Answer<TaskAnswer> {
    one(&queue, &query.id).await
}

/// `GET /api/queues/{queue}/tasks/batch`: the task whose id is `batch` (the route of the same
/// name takes the POST of a batch).
pub(crate) async fn task_named_batch(Target(queue): Target) -> Answer<TaskAnswer> {
    one(&queue, "batch").await
}

async fn one(queue: &Queue, id: &str) -> Answer<TaskAnswer> {
    let info = queue
        .inspector()
        .get(id)
        .await
        .map_err(|e| ApiError::from_queue(e, queue, Some(id)))?
        .ok_or_else(|| ApiError::from_queue(Error::TaskNotFound, queue, Some(id)))?;
    let mut answer = json::task_with_actions(&info);
    // The queue clock's time, for the page's relative times and flags: one request a refresh.
    answer.now = Some(rfc3339(queue.now()));
    Ok(Json(answer))
}

/// `POST /api/queues/{queue}/tasks/batch` with `{"action": "run|delete|archive|cancel",
/// "ids": [id…]}` (1 to [`MAX_BATCH`] ids). A task that refuses the action is listed in
/// `failed` and the batch goes on; a database failure stops it (503, saying how many were
/// done).
#[utoipa::path(post, path = "/api/queues/{queue}/tasks/batch", tag = "tasks",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        super::params::QueueParam),
    request_body = BatchBody,
    responses((status = 200, description = "What was done", body = BatchDone)))]
pub(crate) async fn batch(
    Target(queue): Target,
    ApiJson(BatchBody { action, ids }): ApiJson<BatchBody>,
) -> Answer<BatchDone> {
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
/// the tasks found, paged by cursor only: one
/// [`Inspector::tasks`](retry_runtime::durable::Inspector::tasks) either way.
#[utoipa::path(get, path = "/api/queues/{queue}/tasks", tag = "tasks",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        super::params::QueueParam, TasksQuery),
    responses((status = 200, description = "A page of the state", body = TasksPage)))]
pub(crate) async fn tasks(
    Target(queue): Target,
    ApiQuery(query): ApiQuery<TasksQuery>,
) -> Answer<TasksPage> {
    let state = TaskState::from(query.state);
    let size = query
        .size
        .map_or(DEFAULT_PAGE_SIZE, |size| size.0.min(MAX_PAGE_SIZE));
    let fail = |e| ApiError::from_queue(e, &queue, None);
    let inspector = queue.inspector();
    // An empty `after` is no cursor (as an empty kind or search is no filter).
    let after = query.after.as_deref().filter(|a| !a.is_empty());
    if after.is_some() && query.page.is_some() {
        return Err(ApiError::bad_request(
            "give page or after, not both: after (the next of a page) already says where",
        ));
    }
    let kind = query.kind.as_deref().filter(|k| !k.is_empty());
    let search = query.search.as_deref().filter(|s| !s.is_empty());
    if search.is_some_and(|s| s.contains('\0')) {
        // SQLite's LIKE stops at NUL: "%\0…%" would match every task.
        return Err(ApiError::bad_request(
            "a search cannot hold NUL (U+0000): SQLite's LIKE would stop there and match every task",
        ));
    }
    let filtered = kind.is_some() || search.is_some();
    if filtered && query.page.is_some() {
        return Err(ApiError::bad_request(
            "a filtered list (kind, search) pages by cursor: give after (the next of the page \
             before), not page",
        ));
    }
    let mut tasks = TaskQuery::new(state).size(size);
    tasks = match (after, query.page) {
        (Some(after), _) => tasks.after(after.parse::<Cursor>().map_err(fail)?),
        (None, _) if filtered => tasks,
        (None, page) => tasks.page(page.map_or(1, |page| page.0)),
    };
    if let Some(kind) = kind {
        tasks = tasks.kind(kind);
    }
    if let Some(search) = search {
        tasks = tasks.search(search);
    }
    let page = inspector.tasks(tasks).await.map_err(fail)?;
    let total = inspector.count(state).await.map_err(fail)?;
    let mut answer = if filtered {
        json::found(&page, total, state, kind, search)
    } else {
        json::page(&page.tasks, page.next, total, state)
    };
    // The kinds present in the state: the page's kind selector, in the same request.
    if query.kinds == Some(Flag::Yes) {
        answer.kinds = Some(inspector.kinds(state).await.map_err(fail)?);
    }
    // Which active tasks run, by the live workers' heartbeats (the others are prefetched): the
    // same source as the count in `stats`.
    if state == TaskState::Active {
        let live = inspector.workers().await.map_err(fail)?;
        let running = running_ids(&queue, &live).await.map_err(fail)?;
        answer.running = Some(
            answer
                .ids()
                .filter(|id| running.iter().any(|r| r == id))
                .map(str::to_owned)
                .collect(),
        );
    }
    let (stats, now) = stats_of(&queue).await?;
    answer.stats = Some(stats);
    answer.now = Some(now);
    Ok(Json(answer))
}
