//! The web dashboard of a durable queue: an overview of every queue, one tab per task state,
//! the actions of the inspector, and the JSON API the page itself uses.
//!
//! - [`serve`] runs it on its own (what `retry-queue dash` does): 127.0.0.1:8080 unless told
//!   otherwise, and a non-loopback address only with a token ([`DashOptions`]).
//! - [`router`] mounts it inside an application's own axum server (under any path, with
//!   `Router::nest`); [`router_with`] adds a token and read-only mode.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use retry_queue::dashboard::{self, DashOptions};
//! use retry_runtime::durable::Queue;
//!
//! let queue = Queue::connect("sqlite://tasks.db").await?;
//! // Inside an app: the page at /ops/queue, its API at /ops/queue/api/….
//! let app: axum::Router = axum::Router::new().nest("/ops/queue", dashboard::router(queue.clone()));
//! // On its own, on localhost:
//! dashboard::serve(queue, DashOptions::default()).await?;
//! # let _ = app;
//! # Ok(())
//! # }
//! ```
//!
//! # API
//!
//! The JSON API under `/api`, which the page itself uses; `retry-queue --json` prints the same
//! JSON:
//!
//! | route | answer |
//! | --- | --- |
//! | `GET /api/queues` | `{"now", "queues": [queue…]}` |
//! | `GET /api/queues/{queue}/tasks?state=retry&page=1&size=20` (or `&after=CURSOR` instead of `page`: the `next` of the page before) | `{"tasks": [task…], "next": cursor or null, "total": n, "actions": {"task": […], "bulk": […]}}` |
//! | `GET /api/queues/{queue}/tasks?state=retry&kind=K&search=TEXT&size=20` (and `&after=CURSOR`; no `page`) | the tasks of kind `K` whose id, payload or last error contains `TEXT` (case-insensitive; either filter alone too): the answer above and `{"kind", "search", "searched", "search_limit_reached", "search_window"}`; a search reads at most the next `search_window` (10 000) tasks of the state, says how many it read, and sets `search_limit_reached` when it stopped there (its `next` goes on after them); `total` counts the whole state |
//! | `GET /api/queues/{queue}/kinds?state=retry` | `{"queue", "state", "kinds": [kind…]}`, sorted, at most 200 |
//! | `GET /api/queues/{queue}/tasks/{id}` | the task, payload and failure history included, and `"actions"`: those its state takes (404 when unknown) |
//! | `POST /api/queues/{queue}/tasks/batch` with `{"action": "run\|delete\|archive\|cancel", "ids": [id…]}` (1 to 1 000 ids) | `{"queue", "action", "done": n, "failed": [{"id", "error"}…]}`: a task that refuses the action (`"no such task"`, an active one) is listed and the batch goes on |
//! | `GET /api/queues/{queue}/errors?state=retry` | `{"queue", "state", "groups": [group…]}` |
//! | `POST /api/queues/{queue}/tasks/{id}/run\|delete\|archive\|cancel` | `{"queue", "id", "action"}` |
//! | `POST /api/queues/{queue}/run-all?state=archived` | `{"queue", "state", "count"}` |
//! | `POST /api/queues/{queue}/delete-all?state=archived` | `{"queue", "state", "count"}` |
//! | `POST /api/queues/{queue}/pause\|unpause` | `{"queue", "paused"}` |
//!
//! Every error is `{"error": "…"}`: 400 for a bad state, page, size or queue name, 404 for an
//! unknown task or route, 409 for an action on an active task, 503 when the database fails.
//!
//! - A task: `TaskInfo`'s field names, `{"id", "queue", "kind", "state", "retried",
//!   "max_retry", "payload", "enqueued_at", "next_process_at", "last_err", "last_failed_at",
//!   "completed_at", "lease_expires_at", "errors"}`; `state` lower case (`"retry"`), `payload`
//!   the stored JSON text as a string, times RFC 3339 in UTC or `null` when absent;
//!   `lease_expires_at` is set on an active task only (past it, the worker is presumed dead and
//!   the recoverer retries the task: the page flags it); `errors` the failure history, oldest
//!   first, `[{"retried", "at", "error"}…]` (the last 10).
//! - A queue: `{"queue", "counts": {"pending": n, "scheduled": n, "active": n,
//!   "retry": n, "archived": n, "completed": n}, "paused", "processed_today", "failed_today",
//!   "oldest_pending_age_secs"}` (whole seconds, `null` without pending tasks).
//! - An error group: `{"last_err", "count", "oldest", "newest"}`.
//!
//!
//! The `actions` of a page name the actions a task of its state takes and the bulk actions of
//! the state: the page shows buttons for these.
//!
//! # Security
//!
//! - **Token.** With [`DashOptions::token`], every request under `/api` needs
//!   `Authorization: Bearer <token>` (401 otherwise). The page, its script and its style hold
//!   no data and load without it; the page asks for the token once and keeps it in the tab's
//!   `sessionStorage`, sending it with each API call.
//! - **Loopback only without a token.** [`serve`] refuses a non-loopback `listen` address
//!   without a token, before binding. A token-less dashboard also answers only requests whose
//!   `Host` is `localhost`, `127.x.y.z` or `[::1]` (a page of another site cannot reach it by
//!   DNS rebinding).
//! - **Read-only.** Every POST answers 403, and the page shows no buttons.
//! - **Same origin.** A POST whose `Origin` (or, without one, `Sec-Fetch-Site`, then
//!   `Referer`) names another origin answers 403.
//! - **Escaping.** The page writes every value as text (never as HTML), under a strict
//!   content security policy (its own script and style only).
//! - **Bad input** answers 400 or 404 with `{"error": "…"}`, never 500; a database failure 503.

mod api;
mod guard;
mod page;
mod task_api;

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use retry_runtime::durable::Queue;

pub use api::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};

use guard::Guard;

use crate::ops::{Action, Bulk};

/// The address [`serve`] listens on by default: `127.0.0.1:8080`.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

/// How [`serve`] runs the dashboard (the flags of `retry-queue dash`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DashOptions {
    /// Where to listen; [`DEFAULT_LISTEN`] by default. A non-loopback address needs a token.
    pub listen: SocketAddr,
    /// Refuse every action (403 to every POST) and show no buttons.
    pub read_only: bool,
    /// `Some(T)`: every API request needs `Authorization: Bearer T`. Required to listen on a
    /// non-loopback address.
    pub token: Option<String>,
}

impl Default for DashOptions {
    fn default() -> DashOptions {
        DashOptions {
            listen: DEFAULT_LISTEN,
            read_only: false,
            token: None,
        }
    }
}

impl DashOptions {
    /// Checks the options as [`serve`] does before binding: a non-loopback `listen` needs a
    /// token, and a token is not blank.
    pub fn check(&self) -> Result<(), DashError> {
        if let Some(token) = &self.token {
            if token.trim().is_empty() {
                return Err(DashError::BlankToken);
            }
        } else if !self.listen.ip().is_loopback() {
            return Err(DashError::TokenRequired {
                listen: self.listen,
            });
        }
        Ok(())
    }
}

/// Why [`serve`] did not start or stopped.
#[derive(Debug)]
pub enum DashError {
    /// `listen` is not a loopback address and no token was given.
    TokenRequired {
        /// The address asked for.
        listen: SocketAddr,
    },
    /// The token is empty or only spaces.
    BlankToken,
    /// The address could not be bound (in use, not allowed).
    Bind {
        /// The address asked for.
        listen: SocketAddr,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The server failed while running.
    Serve(std::io::Error),
}

impl fmt::Display for DashError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DashError::TokenRequired { listen } => write!(
                f,
                "refusing to listen on {listen} without a token: anyone who reaches that \
                 address could read and change the queue; pass --token T (every request then \
                 needs `Authorization: Bearer T`) or listen on 127.0.0.1"
            ),
            DashError::BlankToken => f.write_str("the dashboard's token is blank"),
            DashError::Bind { listen, source } => {
                write!(f, "cannot listen on {listen}: {source}")
            }
            DashError::Serve(e) => write!(f, "the dashboard's server failed: {e}"),
        }
    }
}

impl std::error::Error for DashError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DashError::Bind { source, .. } => Some(source),
            DashError::Serve(e) => Some(e),
            _ => None,
        }
    }
}

/// The dashboard as a router to mount in an application (`Router::nest("/ops/queue", …)`):
/// no token, actions allowed, any `Host` (the application decides who reaches it). The page
/// is at the mount path, the API under `api/`.
///
/// `queue` is any handle on the database (its name does not matter): the page shows every
/// queue of the database.
pub fn router(queue: Queue) -> Router {
    build(queue, Guard::default())
}

/// [`router`] with the token and read-only mode of `options`; a token-less router for a
/// loopback `listen` answers only loopback `Host` names, as [`serve`] does.
pub fn router_with(queue: Queue, options: &DashOptions) -> Router {
    build(
        queue,
        Guard {
            token: options.token.clone(),
            read_only: options.read_only,
            loopback_hosts_only: options.token.is_none() && options.listen.ip().is_loopback(),
        },
    )
}

fn build(queue: Queue, guard: Guard) -> Router {
    let read_only = guard.read_only;
    let queue = Arc::new(queue);
    let action = |action: Action| {
        let queue = queue.clone();
        post(move |path| api::task_action(action, queue, path))
    };
    let bulk = |bulk: Bulk| {
        let queue = queue.clone();
        post(move |path, query| api::bulk(bulk, queue, path, query))
    };
    let pause = |paused: bool| {
        let queue = queue.clone();
        post(move |path| api::set_paused(paused, queue, path))
    };
    let mut api_routes = Router::new()
        .route("/api/queues", get(api::queues))
        .route("/api/queues/{queue}/tasks", get(api::tasks))
        .route("/api/queues/{queue}/errors", get(api::errors))
        .route("/api/queues/{queue}/kinds", get(task_api::kinds))
        .route("/api/queues/{queue}/tasks/{id}", get(task_api::task))
        .route(
            "/api/queues/{queue}/tasks/batch",
            post(task_api::batch).get(task_api::task_named_batch),
        )
        .with_state(queue.clone())
        .route("/api/queues/{queue}/pause", pause(true))
        .route("/api/queues/{queue}/unpause", pause(false));
    for a in Action::ALL {
        let route = format!("/api/queues/{{queue}}/tasks/{{id}}/{}", a.name());
        api_routes = api_routes.route(&route, action(a));
    }
    for b in Bulk::ALL {
        api_routes = api_routes.route(&format!("/api/queues/{{queue}}/{}", b.name()), bulk(b));
    }
    Router::new()
        .route("/", get(move |req| page::index(read_only, req)))
        .route("/assets/dash.js", get(page::script))
        .route("/assets/tasks.js", get(page::tasks_script))
        .route("/assets/dash.css", get(page::style))
        .merge(api_routes)
        .fallback(api::not_found)
        .method_not_allowed_fallback(api::wrong_method)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(guard),
            guard::check,
        ))
}

/// Runs the dashboard on `options.listen` until the server fails (the `dash` subcommand).
///
/// Refuses, before binding, a non-loopback address without a token
/// ([`DashError::TokenRequired`]) and a blank token.
pub async fn serve(queue: Queue, options: DashOptions) -> Result<(), DashError> {
    options.check()?;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|source| DashError::Bind {
            listen: options.listen,
            source,
        })?;
    serve_on(listener, queue, options).await
}

/// [`serve`] on a listener already bound (to learn the port of `127.0.0.1:0` first, say).
/// `options.listen` should be its address: it decides the checks, as for [`serve`].
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    queue: Queue,
    options: DashOptions,
) -> Result<(), DashError> {
    options.check()?;
    let app = router_with(queue, &options);
    axum::serve(listener, app).await.map_err(DashError::Serve)
}
