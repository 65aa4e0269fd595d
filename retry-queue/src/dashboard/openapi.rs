//! The OpenAPI 3.1 document of the API, generated from the handlers' and answers' types
//! (`utoipa`): served at `GET /api/openapi.json` and committed as
//! `retry-queue/docs/openapi.json` (a test holds the two equal; schemathesis fuzzes every route
//! from it in CI, `scripts/schemathesis.sh`).

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use super::params::{BatchBody, DeleteAllState, Flag, RunAllState};
use crate::json::{
    Acted, Actions, BatchDone, BatchFailure, BucketJson, BulkDone, Counts, EntryJson, ErrorBody,
    ErrorGroupJson, Errors, FailedJson, Filtered, HeldJson, History, Kinds, Overview, Paused,
    ProbeJson, QueueJson, Schedulers, StateGroups, StateName, SystemJson, Systems, TaskAnswer,
    TaskJson, TasksPage, Workers,
};
use crate::ops::Action;

/// The document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "retry-queue dashboard API",
        description = "The JSON API of retry-queue's dashboard (the page uses it; `retry-queue \
                       --json` prints the same answers). Every refusal and failure answers \
                       `{\"error\": \"…\"}`. With a token, every route needs \
                       `Authorization: Bearer <token>`."
    ),
    paths(
        super::overview_api::queues,
        super::overview_api::workers,
        super::overview_api::schedulers,
        super::overview_api::history,
        super::overview_api::systems,
        super::task_api::tasks,
        super::task_api::kinds,
        super::task_api::task,
        super::task_api::task_by_query,
        super::task_api::batch,
        super::api::errors,
        super::api::task_action,
        super::api::task_action_by_query,
        super::api::run_all,
        super::api::delete_all,
        super::api::pause,
        super::api::unpause,
        openapi_json,
    ),
    components(schemas(
        Acted, Actions, BatchBody, BatchDone, BatchFailure, BucketJson, BulkDone, Counts,
        EntryJson, ErrorBody, ErrorGroupJson, Errors, FailedJson, Filtered, Flag, HeldJson,
        History, Kinds, Overview, Paused, ProbeJson, QueueJson, Schedulers, StateGroups, StateName,
        SystemJson, Systems, TaskAnswer, TaskJson, TasksPage, Workers, Action, RunAllState,
        DeleteAllState
    )),
    modifiers(&Refusals),
    security(("bearer" = []))
)]
pub(crate) struct ApiDoc;

/// Adds the bearer scheme, and the refusals every route may answer (each `{"error": "…"}`).
struct Refusals;

/// The statuses of refusals and failures any route may answer, and why.
const REFUSALS: &[(&str, &str)] = &[
    ("400", "Bad input: a path, query or body that does not fit"),
    ("401", "The token is missing or wrong"),
    ("403", "Read-only, another origin, or a foreign Host"),
    ("404", "No such task or route"),
    ("405", "Wrong method"),
    ("409", "The task is active"),
    ("413", "The body is too large"),
    ("414", "The request line is too long"),
    ("415", "The body is not JSON"),
    ("429", "Too many wrong tokens from this address"),
    ("431", "The headers are too large"),
    ("503", "The database failed"),
];

impl Modify for Refusals {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        for item in doc.paths.paths.values_mut() {
            let operations: [&mut Option<Operation>; 2] = [&mut item.get, &mut item.post];
            for operation in operations.into_iter().flatten() {
                for (status, why) in REFUSALS {
                    let response = ResponseBuilder::new()
                        .description(*why)
                        .content(
                            "application/json",
                            ContentBuilder::new()
                                .schema(Some(Ref::from_schema_name("ErrorBody")))
                                .build(),
                        )
                        .build();
                    operation
                        .responses
                        .responses
                        .entry((*status).to_owned())
                        .or_insert(response.into());
                }
            }
        }
    }
}

/// The document as JSON text, pretty-printed with a final newline (as committed).
pub(crate) fn document() -> String {
    let mut text = ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}

/// `GET /api/openapi.json`: this document.
#[utoipa::path(get, path = "/api/openapi.json", tag = "meta",
    responses((status = 200, description = "The OpenAPI document of this API", content_type = "application/json")))]
pub(crate) async fn openapi_json() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], document()).into_response()
}

#[cfg(test)]
mod tests {
    use retry_runtime::durable::TaskState;
    use utoipa::PartialSchema;

    use super::{DeleteAllState, RunAllState};
    use crate::ops::Bulk;

    /// The document's enum of the states a bulk action takes is the server's rule.
    #[test]
    fn the_bulk_actions_state_enums_are_the_states_they_take() {
        let names = |schema: serde_json::Value| -> Vec<String> {
            let values = schema["enum"].as_array().expect("an enum").clone();
            values
                .into_iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect()
        };
        for (bulk, schema) in [
            (
                Bulk::RunAll,
                serde_json::to_value(RunAllState::schema()).unwrap(),
            ),
            (
                Bulk::DeleteAll,
                serde_json::to_value(DeleteAllState::schema()).unwrap(),
            ),
        ] {
            let taken: Vec<String> = TaskState::ALL
                .into_iter()
                .filter(|s| bulk.allowed(*s))
                .map(|s| s.as_str().to_owned())
                .collect();
            assert_eq!(names(schema), taken, "{}", bulk.name());
        }
    }
}
