//! The API of the queues at a glance: every queue's figures, a queue's history of attempts, and
//! who runs (the live workers and schedulers).

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Query, State};
use retry_runtime::durable::{HistorySpan, Queue};

use super::api::{Answer, ApiError, Params, number_of, queue_of};
use crate::json;

/// `GET /api/queues`: every queue of the database, each with its number of live workers (the
/// page's "no worker is running" banner), and the queue clock's time.
pub(crate) async fn queues(State(base): State<Arc<Queue>>) -> Answer {
    let fail = |e| ApiError::from_queue(e, &base, None);
    let inspector = base.inspector();
    let stats = inspector.stats().await.map_err(fail)?;
    let workers = inspector.workers().await.map_err(fail)?;
    Ok(Json(json::overview(base.now(), &stats, &workers)))
}

/// `GET /api/workers`: the live workers of the database and the tasks each is running.
pub(crate) async fn workers(State(base): State<Arc<Queue>>) -> Answer {
    let workers = base.inspector().workers().await;
    let workers = workers.map_err(|e| ApiError::from_queue(e, &base, None))?;
    Ok(Json(json::workers(&workers)))
}

/// `GET /api/schedulers`: the entries of the database's live schedulers.
pub(crate) async fn schedulers(State(base): State<Arc<Queue>>) -> Answer {
    let entries = base.inspector().schedulers().await;
    let entries = entries.map_err(|e| ApiError::from_queue(e, &base, None))?;
    Ok(Json(json::schedulers(&entries)))
}

/// `GET /api/queues/{queue}/history?hours=N` (1 to 168; 24 by default) or `?days=N` (1 to 90).
pub(crate) async fn history(
    State(base): State<Arc<Queue>>,
    path: Result<Path<String>, PathRejection>,
    params: Params,
) -> Answer {
    let Path(name) = path?;
    let Query(params) = params?;
    let queue = queue_of(&base, name)?;
    let span = match (params.contains_key("hours"), params.contains_key("days")) {
        (true, true) => {
            return Err(ApiError::bad_request(
                "give hours or days, not both: ?hours=24 or ?days=30",
            ));
        }
        (_, true) => HistorySpan::Days(number_of(&params, "days", 1, 90, false)?),
        _ => HistorySpan::Hours(number_of(
            &params,
            "hours",
            24,
            HistorySpan::MAX_HOURS,
            false,
        )?),
    };
    let buckets = queue
        .inspector()
        .history(span)
        .await
        .map_err(|e| ApiError::from_queue(e, &queue, None))?;
    Ok(Json(json::history(queue.name(), span, &buckets)))
}
