//! The API of the queues at a glance: every queue's figures, a queue's history of attempts, and
//! who runs (the live workers and schedulers).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use retry_runtime::durable::{HistorySpan, Queue};

use super::api::Answer;
use super::error::ApiError;
use super::params::{ApiQuery, HistoryQuery, Target};
use crate::json::{self, History, Overview, Schedulers, Systems, Workers};

/// `GET /api/queues`: every queue of the database, each with its number of live workers and
/// its earliest due scheduled or retry task (the page's "no worker is running" banner), and
/// the queue clock's time.
#[utoipa::path(get, path = "/api/queues", tag = "queues",
    responses((status = 200, description = "Every queue", body = Overview)))]
pub(crate) async fn queues(State(base): State<Arc<Queue>>) -> Answer<Overview> {
    let fail = |e| ApiError::from_queue(e, &base, None);
    let inspector = base.inspector();
    let stats = inspector.stats().await.map_err(fail)?;
    let workers = inspector.workers().await.map_err(fail)?;
    let queues = json::figures(&base, &stats, &workers).await.map_err(fail)?;
    Ok(Json(json::overview(base.now(), queues)))
}

/// `GET /api/workers`: the live workers of the database and the tasks each is running.
#[utoipa::path(get, path = "/api/workers", tag = "presence",
    responses((status = 200, description = "The live workers", body = Workers)))]
pub(crate) async fn workers(State(base): State<Arc<Queue>>) -> Answer<Workers> {
    let workers = base.inspector().workers().await;
    let workers = workers.map_err(|e| ApiError::from_queue(e, &base, None))?;
    Ok(Json(json::workers(&workers)))
}

/// `GET /api/schedulers`: the entries of the database's live schedulers.
#[utoipa::path(get, path = "/api/schedulers", tag = "presence",
    responses((status = 200, description = "The live schedulers' entries", body = Schedulers)))]
pub(crate) async fn schedulers(State(base): State<Arc<Queue>>) -> Answer<Schedulers> {
    let entries = base.inspector().schedulers().await;
    let entries = entries.map_err(|e| ApiError::from_queue(e, &base, None))?;
    Ok(Json(json::schedulers(&entries)))
}

/// `GET /api/queues/{queue}/history?hours=N` (1 to 168; 24 by default) or `?days=N` (1 to 90).
#[utoipa::path(get, path = "/api/queues/{queue}/history", tag = "queues",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        super::params::QueueParam, HistoryQuery),
    responses((status = 200, description = "Attempts per hour or day, oldest first", body = History)))]
pub(crate) async fn history(
    Target(queue): Target,
    ApiQuery(query): ApiQuery<HistoryQuery>,
) -> Answer<History> {
    // `days` wins over `hours` when both are given (the document allows the pair).
    let span = match (query.hours, query.days) {
        (_, Some(days)) => HistorySpan::Days(days.0),
        (hours, None) => HistorySpan::Hours(hours.map_or(24, |h| h.0)),
    };
    let buckets = queue
        .inspector()
        .history(span)
        .await
        .map_err(|e| ApiError::from_queue(e, &queue, None))?;
    Ok(Json(json::history(queue.name(), span, &buckets)))
}

/// `GET /api/queues/{queue}/systems`: the queue's tasks per external system they name (due,
/// deferred, in flight, waiting) and what the live workers serving it report of each system
/// (breaker, rate, ramping, their last health probe).
#[utoipa::path(get, path = "/api/queues/{queue}/systems", tag = "queues",
    params(("queue" = String, Path, description = "The queue's name (`~`: the `queue` parameter's)", example = "default"),
        super::params::QueueParam),
    responses((status = 200, description = "The queue's systems, by name", body = Systems)))]
pub(crate) async fn systems(Target(queue): Target) -> Answer<Systems> {
    let systems = queue.inspector().systems().await;
    let systems = systems.map_err(|e| ApiError::from_queue(e, &queue, None))?;
    Ok(Json(json::systems(queue.name(), &systems)))
}
