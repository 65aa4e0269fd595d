//! What a request names, as types: the queue of a `{queue}` path segment (the [`Target`]
//! extractor), the query strings of each route (`Deserialize` structs whose limits are types:
//! a page size of 1 to 1 000, a state that parses, hours of 1 to 168) and the batch's body,
//! read through [`ApiQuery`], [`ApiPath`] and [`ApiJson`] (axum's extractors, rejecting with
//! the one [`ApiError`]). A request that does not fit answers 400 with `{"error": "…"}`,
//! before any handler runs.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Json, Path, Query, Request};
use axum::http::request::Parts;
use retry_runtime::durable::{Queue, TaskState};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use utoipa::{IntoParams, ToSchema};

use super::error::ApiError;
use crate::json::StateName;
use crate::ops::Action;

/// The queue a request is about: its `{queue}` path segment, or, when that segment is `~` and
/// the query has a `queue` parameter, that parameter (how the page reaches a queue named `.`
/// or `..`, which a browser would resolve as a path segment, even written `%2E`; a queue named
/// `~` is the segment `~` without the parameter). The parameter is ignored after any other
/// segment. 1 to 1 KiB: 400 otherwise.
pub(crate) struct Target(pub(crate) Queue);

/// The path segment that defers to `?queue=`.
pub(crate) const QUEUE_IN_QUERY: &str = "~";

impl FromRequestParts<Arc<Queue>> for Target {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, base: &Arc<Queue>) -> Result<Target, ApiError> {
        let Path(mut segments) = Path::<HashMap<String, String>>::from_request_parts(parts, base)
            .await
            .map_err(ApiError::from)?;
        let segment = segments
            .remove("queue")
            .ok_or_else(|| ApiError::bad_request("the route names no queue"))?;
        let Query(query) = Query::<QueueParam>::from_request_parts(parts, base)
            .await
            .map_err(ApiError::from)?;
        // `?queue=` names the queue after the segment `~` only (elsewhere the path does).
        let name = match (segment.as_str(), query.queue) {
            (QUEUE_IN_QUERY, Some(name)) => name,
            _ => segment,
        };
        let queue = Queue::clone(base)
            .try_named(name)
            .map_err(|e| ApiError::from_queue(e, base, None))?;
        Ok(Target(queue))
    }
}

/// axum's `Query<T>` whose rejection is an [`ApiError`] (400 `{"error"}`).
pub(crate) struct ApiQuery<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(value) = Query::<T>::from_request_parts(parts, state).await?;
        Ok(ApiQuery(value))
    }
}

/// axum's `Path<T>` whose rejection is an [`ApiError`] (400 `{"error"}`).
pub(crate) struct ApiPath<T>(pub(crate) T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(value) = Path::<T>::from_request_parts(parts, state).await?;
        Ok(ApiPath(value))
    }
}

/// axum's `Json<T>` body whose rejection is an [`ApiError`] (400, 413 or 415 `{"error"}`).
pub(crate) struct ApiJson<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let Json(value) = Json::<T>::from_request(req, state).await?;
        Ok(ApiJson(value))
    }
}

/// A whole number from `MIN` to `MAX`, written in decimal digits only (`+1`, `1.0`, `0x10`
/// are refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bounded<const MIN: u32, const MAX: u32>(pub(crate) u32);

impl<'de, const MIN: u32, const MAX: u32> Deserialize<'de> for Bounded<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let n = (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
            .then(|| text.trim_start_matches('0').parse::<u32>().ok())
            .flatten()
            .filter(|n| (MIN..=MAX).contains(n));
        n.map(Bounded).ok_or_else(|| {
            serde::de::Error::custom(format_args!(
                "a whole number from {MIN} to {MAX} was expected, got {:?}",
                crate::ops::clean(&text)
            ))
        })
    }
}

/// The largest `size` a request may ask for; above [`MAX_PAGE_SIZE`](super::MAX_PAGE_SIZE),
/// a page is cut to that.
pub(crate) const MAX_SIZE_ASKED: u32 = 1000;

/// `size`: 1 to 1 000.
pub(crate) type PageSize = Bounded<1, MAX_SIZE_ASKED>;
/// `page`: 1 and up.
pub(crate) type PageNumber = Bounded<1, { u32::MAX }>;

/// `kinds=1`: add the kinds of the state to the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, ToSchema)]
pub(crate) enum Flag {
    #[serde(rename = "0")]
    No,
    #[serde(rename = "1")]
    Yes,
}

/// The query of `GET /api/queues/{queue}/tasks`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct TasksQuery {
    /// The state listed.
    pub(crate) state: StateName,
    /// The page, from 1 (not with `after`, nor with a filter).
    #[param(value_type = Option<u32>, minimum = 1)]
    pub(crate) page: Option<PageNumber>,
    /// Tasks a page: 1 to 1 000, 20 by default; above 100, a page has 100.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub(crate) size: Option<PageSize>,
    /// The `next` of the page before (an empty value: none; not with `page`).
    pub(crate) after: Option<String>,
    /// Only tasks of this kind (an empty value: no filter).
    pub(crate) kind: Option<String>,
    /// Only tasks whose id, payload or last error contains this text, case-insensitive (an
    /// empty value: no filter). Without NUL (400): SQLite's `LIKE` would stop at it.
    #[param(pattern = "^[^\\u0000]*$")]
    pub(crate) search: Option<String>,
    /// `1`: the answer lists the kinds of the state too.
    #[param(value_type = Option<Flag>)]
    pub(crate) kinds: Option<Flag>,
}

/// A query naming a state: `?state=S` (required).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct StateQuery {
    /// The state.
    pub(crate) state: StateName,
}

/// The query of `POST …/run-all`, as the document shows it: [`StateQuery`] whose state is one
/// that `run-all` takes (the others answer 400: pending tasks wait already, active ones run).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct RunAllQuery {
    /// The state whose tasks are made pending.
    #[param(value_type = RunAllState)]
    pub(crate) state: StateName,
}

/// The query of `POST …/delete-all`, as the document shows it: any state but `active` (400: a
/// running task is cancelled, not deleted).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeleteAllQuery {
    /// The state whose tasks are deleted.
    #[param(value_type = DeleteAllState)]
    pub(crate) state: StateName,
}

/// The states `run-all` takes (the document's enum; [`Bulk::allowed`](crate::ops::Bulk) is the
/// server's rule, and a test holds the two equal).
#[derive(Clone, Copy, Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RunAllState {
    Scheduled,
    Retry,
    Archived,
    Completed,
}

/// The states `delete-all` takes (the document's enum).
#[derive(Clone, Copy, Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DeleteAllState {
    Pending,
    Scheduled,
    Retry,
    Archived,
    Completed,
}

/// A comma-separated list of distinct states: `retry,archived`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StateList(pub(crate) Vec<TaskState>);

impl<'de> Deserialize<'de> for StateList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let mut states = Vec::new();
        for name in text.split(',') {
            let state = name
                .parse::<TaskState>()
                .map_err(|e| serde::de::Error::custom(crate::ops::clean(&e.to_string())))?;
            if states.contains(&state) {
                return Err(serde::de::Error::custom(format_args!(
                    "states names {} twice",
                    state.as_str()
                )));
            }
            states.push(state);
        }
        Ok(StateList(states))
    }
}

/// The query of `GET /api/queues/{queue}/errors`: `state` (retry by default) or `states` (or
/// both: their union, `state` first).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ErrorsQuery {
    /// One state: `retry` by default (with `states`: added in front of them, unless listed).
    pub(crate) state: Option<StateName>,
    /// Several states, comma-separated, each once: `retry,archived`.
    #[param(value_type = Option<String>, pattern = "^(pending|scheduled|active|retry|archived|completed)(,(pending|scheduled|active|retry|archived|completed))*$")]
    pub(crate) states: Option<StateList>,
}

/// The query of `GET /api/queues/{queue}/history`: `hours` (1 to 168, 24 by default) or
/// `days` (1 to 90).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct HistoryQuery {
    /// The last hours, this one included: 1 to 168.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 168)]
    pub(crate) hours: Option<Bounded<1, 168>>,
    /// The last UTC days, today included: 1 to 90 (with `hours` too: `days` wins).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 90)]
    pub(crate) days: Option<Bounded<1, 90>>,
}

/// The query of the routes that take the task's id in the query: `?id=ID`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct IdQuery {
    /// The task's id (percent-encoded).
    #[param(example = "r1")]
    pub(crate) id: String,
}

/// The `queue` query parameter every route with a `{queue}` segment takes (read by
/// [`Target`]), for the OpenAPI document.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct QueueParam {
    /// The queue's name after the path segment `~` (a queue named `.` or `..`); ignored
    /// after any other.
    pub(crate) queue: Option<String>,
}

/// The path of an action on one task: `…/tasks/{id}/{action}`.
#[derive(Debug, Deserialize)]
pub(crate) struct ActionPath {
    pub(crate) id: String,
    pub(crate) action: Action,
}

/// The path of `…/task/{action}?id=ID`.
#[derive(Debug, Deserialize)]
pub(crate) struct ActionOnly {
    pub(crate) action: Action,
}

/// The path of `…/tasks/{id}`.
#[derive(Debug, Deserialize)]
pub(crate) struct IdPath {
    pub(crate) id: String,
}

/// The body of `POST /api/queues/{queue}/tasks/batch`.
#[derive(Debug, Deserialize, ToSchema)]
pub(crate) struct BatchBody {
    /// The action.
    pub(crate) action: Action,
    /// 1 to 1 000 ids.
    #[schema(min_items = 1, max_items = 1000)]
    pub(crate) ids: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(text: &str) -> Result<PageSize, String> {
        serde_json::from_value::<PageSize>(serde_json::Value::String(text.into()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_page_size_is_1_to_1000_in_digits() {
        assert_eq!(size("1"), Ok(Bounded(1)));
        assert_eq!(size("0020"), Ok(Bounded(20)));
        assert_eq!(size("1000"), Ok(Bounded(1000)));
        for bad in [
            "0",
            "000",
            "1001",
            "",
            "+1",
            "1.0",
            "-5",
            "ten",
            "99999999999999999999",
        ] {
            assert!(size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_state_list_parses_each_state_once() {
        let list = |text: &str| {
            serde_json::from_value::<StateList>(serde_json::Value::String(text.into()))
                .map(|l| l.0)
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            list("retry,archived"),
            Ok(vec![TaskState::Retry, TaskState::Archived])
        );
        assert!(list("retry,retry").unwrap_err().contains("twice"));
        assert!(list("retry,").is_err());
        assert!(list("nope").is_err());
    }
}
