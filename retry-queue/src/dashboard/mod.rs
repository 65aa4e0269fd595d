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
//! JSON. Its OpenAPI document, generated from the handlers' and answers' types, is served at
//! `GET /api/openapi.json` (and committed as `retry-queue/docs/openapi.json`). Every route
//! with `{queue}` also takes the segment `~` with `?queue=NAME` (a queue named `.` or `..`):
//!
//! | route | answer |
//! | --- | --- |
//! | `GET /api/openapi.json` | the OpenAPI 3.1 document of this API |
//! | `GET /api/queues` | `{"now", "queues": [queue…]}` |
//! | `GET /api/workers` | `{"workers": [worker…]}`: the live workers, by id |
//! | `GET /api/schedulers` | `{"entries": [entry…]}`: the entries of the live schedulers, by queue and spec |
//! | `GET /api/queues/{queue}/tasks?state=retry&page=1&size=20` (`size` 1 to 1 000, a page holding at most 100; or `&after=CURSOR` instead of `page`: the `next` of the page before; an empty `after` is none) | `{"tasks": [task…], "next": cursor or null, "total": n, "actions": {"task": […], "bulk": […]}, "stats": queue, "now"}` |
//! | `GET /api/queues/{queue}/tasks?state=retry&kind=K&search=TEXT&size=20` (and `&after=CURSOR`; no `page`) | the tasks of kind `K` whose id, payload or last error contains `TEXT` (case-insensitive; either filter alone too; a `TEXT` with NUL answers 400): the answer above and `{"kind", "search", "searched", "search_limit_reached", "search_window"}`; a search reads at most the next `search_window` (10 000) tasks of the state, says how many it read, and sets `search_limit_reached` when it stopped there (its `next` goes on after them); `total` counts the whole state |
//! | `…/tasks?…&kinds=1` (either form) | the same, with `"kinds"`: the kinds present in the state, as `…/kinds` answers (the page's kind selector, in the same request) |
//! | `GET /api/queues/{queue}/kinds?state=retry` | `{"queue", "state", "kinds": [kind…]}`, sorted, at most 200 |
//! | `GET /api/queues/{queue}/tasks/{id}` (or `GET /api/queues/{queue}/task?id=ID`, what the page uses) | the task, payload and failure history included, `"actions"`: those its state takes, and `"now"` (the queue clock's; 404 when unknown) |
//! | `POST /api/queues/{queue}/tasks/batch` with `{"action": "run\|delete\|archive\|cancel", "ids": [id…]}` (1 to 1 000 ids) | `{"queue", "action", "done": n, "failed": [{"id", "error"}…]}`: a task that refuses the action (`"no such task"`, an active one) is listed and the batch goes on |
//! | `GET /api/queues/{queue}/errors?state=retry` | `{"queue", "state", "groups": [group…], "stats": queue, "now"}` |
//! | `GET /api/queues/{queue}/errors?states=retry,archived` (with `state=S` too: the union, `S` first) | `{"queue", "states": [{"state", "groups": [group…]}…], "stats": queue, "now"}` |
//! | `GET /api/queues/{queue}/history?hours=24` (1 to 168) or `?days=30` (1 to 90; with `hours` too, `days` wins) | `{"queue", "hours" or "days", "buckets": [{"start", "processed", "failed"}…]}`, oldest first, empty buckets included |
//! | `GET /api/queues/{queue}/systems` | `{"queue", "systems": [{"system", "due", "deferred", "in_flight", "waiting", "breaker", "rate", "ramping", "workers", "probe"}…]}`: the queue's tasks per system they name, and what the live workers report of each (breaker `open`/`half_open`/`closed` or `null`, rate per second or `null`: unlimited, last probe worst-of: `{"passed", "error", "age_ms", "workers", "failed"}` or `null`) |
//! | `POST /api/queues/{queue}/tasks/{id}/{action}` (`run\|delete\|archive\|cancel`) | `{"queue", "id", "action"}` |
//! | `POST /api/queues/{queue}/task/{action}?id=ID` | the same, the id in the query (what the page uses: a browser resolves a path segment `.` or `..`, even written `%2E`, before sending) |
//! | `POST /api/queues/{queue}/run-all?state=archived` (`scheduled`, `retry`, `archived` or `completed`) | `{"queue", "state", "count"}` |
//! | `POST /api/queues/{queue}/delete-all?state=archived` (any state but `active`) | `{"queue", "state", "count"}` |
//! | `POST /api/queues/{queue}/pause\|unpause` | `{"queue", "paused"}` |
//!
//! Every error is `{"error": "…"}` (one type, one `IntoResponse`): 400 for a bad state, page,
//! size, action, body or queue name, 404 for an unknown task or route, 409 for an action on an
//! active task, 408/413/414/431 for a request too slow or too large, 429 for a locked-out
//! address, 503 when the database fails.
//!
//! - A task: `TaskInfo`'s field names, `{"id", "queue", "kind", "state", "retried",
//!   "max_retry", "payload", "enqueued_at", "next_process_at", "last_err", "last_failed_at",
//!   "completed_at", "lease_expires_at", "errors"}`, and `"archive_reason"` on an archived task
//!   (`"exhausted"`, `"operator"`, … as `ArchiveReason::as_str` names them); `state` lower
//!   case (`"retry"`), `payload`
//!   the stored JSON text as a string, times RFC 3339 in UTC or `null` when absent;
//!   `lease_expires_at` is set on an active task only (past it, the worker is presumed dead and
//!   the recoverer retries the task: the page flags it); `errors` the failure history, oldest
//!   first, `[{"retried", "at", "error"}…]` (the last 10); `"system"`, `"trace_parent"` (the
//!   W3C `traceparent` of the span that enqueued the task) and `"trace_id"` only when set.
//! - A queue: `{"queue", "counts": {"pending": n, "scheduled": n, "active": n,
//!   "retry": n, "archived": n, "completed": n}, "paused", "processed_today", "failed_today",
//!   "oldest_pending_age_secs", "next_due_at", "workers", "running"}` (whole seconds, `null`
//!   without pending tasks; `next_due_at` the earliest due time of its scheduled and retry
//!   tasks; `workers` the number of live workers serving the queue: the page shows "no worker
//!   is running" over a queue with work due — pending or active tasks, or a past
//!   `next_due_at` — and none; `running` how many of its tasks those workers run).
//! - An error group: `{"last_err", "count", "oldest", "newest"}`.
//! - A worker: `{"id", "host", "pid", "queues": [name…], "concurrency", "started_at",
//!   "last_heartbeat_at", "active": [{"queue", "id", "kind", "started_at"}…], "leader_of":
//!   [name…]}`; a worker is live until it misses three heartbeats (every 5 s by default) or
//!   stops gracefully; `leader_of` names the queues whose maintenance it runs (one leader per
//!   queue).
//! - A scheduler entry: `{"scheduler", "queue", "kind", "spec", "next_run_at",
//!   "last_enqueued_at", "last_task_id", "last_heartbeat_at"}`; `kind` is `null` before the
//!   entry made its first task, the last enqueue `null` until this scheduler enqueued one.
//!
//!
//! The `actions` of a page name the actions a task of its state takes and the bulk actions of
//! the state: the page shows buttons for these. The `stats` of the tasks and errors answers is
//! the queue's object of `GET /api/queues` (zero counts for a queue nobody used), and `now` the
//! server's clock: the page refreshes a queue with that one request.
//!
//! # Security
//!
//! - **Token.** With [`DashOptions::token`], every request under `/api` needs
//!   `Authorization: Bearer <token>` (401 otherwise). The page, its script and its style hold
//!   no data and load without it; the page asks for the token once and keeps it in the tab's
//!   `sessionStorage`, sending it with each API call. The token is trimmed of surrounding
//!   whitespace and must have at least [`MIN_TOKEN_LEN`] (16) characters, at least
//!   [`MIN_TOKEN_DISTINCT`] (8) of them different ([`serve`] refuses another at start-up); an
//!   empty variable is a blank token (refused), a token file is read up to
//!   [`MAX_TOKEN_FILE_BYTES`]. `retry-queue dash` reads it from `--token-file PATH`, else
//!   `--token T`, else [`TOKEN_ENV`] (`RETRY_QUEUE_TOKEN`); both flags at once are refused
//!   ([`DashError::TokenSources`]). Prefer the file or the variable: every user of the machine
//!   can read a process's arguments (`ps`). Compared as SHA-256 digests in constant time (`subtle`).
//! - **A guessing address locked out.** After 10 wrong bearer tokens from one client address
//!   (an IPv6 /64 counts as one), each further one locks that address out for 5 s, then 10 s,
//!   20 s, … up to 5 min: every API request from it answers 429 with `Retry-After`, the right
//!   token included; other addresses are not touched. The failures are forgotten after 15 min
//!   without one; at most 4 096 addresses are remembered. The address is the connection's
//!   (`ConnectInfo<SocketAddr>`, which [`serve`] sets; a router mounted without it counts every
//!   client as one).
//! - **Slow and many clients.** [`serve`] cuts off a connection whose request headers take
//!   longer than [`DashOptions::header_timeout`] (10 s), reads a body within [`BODY_TIMEOUT`]
//!   and up to [`MAX_BODY_BYTES`], cuts off a connection whose answer stalls (its client
//!   reads none of it) for [`DashOptions::write_timeout`] (10 s), and serves at most
//!   [`DashOptions::max_connections`] (256) connections at once, at most
//!   [`DashOptions::max_connections_per_address`] (64) of them from one client address (an
//!   IPv6 /64 counts as one; the next ones answer 503 and are closed), so that one address
//!   cannot hold every slot (the public page and script need no token); a request target
//!   over 8 KiB answers 414, too many or too large headers 431, as JSON with the security
//!   headers.
//! - **Loopback only without a token.** [`serve`] refuses a non-loopback `listen` address
//!   without a token, before binding. A token-less dashboard also answers only requests whose
//!   `Host` is `localhost`, `127.x.y.z` or `[::1]`, with a port of digits if any (a page of
//!   another site cannot reach it by DNS rebinding; `localhost:evil.test` is refused).
//! - **Read-only.** Every POST answers 403, and the page shows no buttons.
//! - **Same origin.** A POST whose `Origin` (or, without one, `Sec-Fetch-Site`, then
//!   `Referer`) names another origin (scheme, host or port) answers 403. The scheme expected is
//!   `http`, or `https` when a proxy says so with `X-Forwarded-Proto: https` (or the request
//!   URI does, HTTP/2). An application serving the router over TLS itself (HTTP/1.1) sets
//!   that header in a layer before it.
//! - **TLS off localhost.** The dashboard speaks plain HTTP: when it is reached from other
//!   machines, put it behind a reverse proxy that terminates TLS (nginx, Caddy, …) and sets
//!   `X-Forwarded-Proto: https`; otherwise the token and every task cross the network in clear.
//! - **Escaping.** The page writes every value as text (never as HTML), under a strict
//!   content security policy (its own script and style only). Control characters (but tab and
//!   newline) and bidirectional controls (U+202A–U+202E, U+2066–U+2069, U+200E/F, U+061C) in
//!   stored text (ids, kinds, errors, payloads, queue names) are shown as marked escapes
//!   (`\u{7}`, `\u{202E}`), so that an id cannot pose as another. Any id can be acted on from the page (`.`, `..`, `/`, `%`, `?`,
//!   `#`: the id travels in the query string); a malformed link (`#/q/%E0%A4%A`) shows the
//!   overview and says so.
//! - **Bad input** answers 400 or 404 with `{"error": "…"}`, never 500; a database failure 503.

mod api;
mod dash_error;
mod error;
mod guard;
mod limits;
mod openapi;
mod options;
mod overview_api;
mod page;
mod params;
mod server;
mod shares;
mod task_api;
mod throttle;
mod token;
mod token_rules;
mod write_deadline;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use retry_runtime::durable::Queue;

pub use api::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
pub use dash_error::DashError;
pub use limits::{BODY_TIMEOUT, MAX_BODY_BYTES};
pub use options::{DEFAULT_LISTEN, DashOptions};
pub use server::{
    DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
    DEFAULT_WRITE_TIMEOUT,
};
pub use token::{MAX_TOKEN_FILE_BYTES, MIN_TOKEN_DISTINCT, MIN_TOKEN_LEN, TOKEN_ENV};
// The command line's reading of the token (`retry-queue dash`); an application passes its token
// in `DashOptions`.
pub(crate) use token::{token_env, token_from};

use guard::Guard;

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
/// loopback `listen` answers only loopback `Host` names, as [`serve`] does. The token is
/// trimmed; call [`DashOptions::check`] first to refuse a short one as [`serve`] does.
pub fn router_with(queue: Queue, options: &DashOptions) -> Router {
    build(
        queue,
        Guard {
            token: options
                .token
                .as_deref()
                .map(|t| guard::TokenDigest::of(t.trim())),
            read_only: options.read_only,
            loopback_hosts_only: options.token.is_none() && options.listen.ip().is_loopback(),
            throttle: Default::default(),
        },
    )
}

fn build(queue: Queue, guard: Guard) -> Router {
    let read_only = guard.read_only;
    let api_routes = Router::new()
        .route("/api/openapi.json", get(openapi::openapi_json))
        .route("/api/queues", get(overview_api::queues))
        .route("/api/workers", get(overview_api::workers))
        .route("/api/schedulers", get(overview_api::schedulers))
        .route("/api/queues/{queue}/tasks", get(task_api::tasks))
        .route("/api/queues/{queue}/errors", get(api::errors))
        .route("/api/queues/{queue}/history", get(overview_api::history))
        .route("/api/queues/{queue}/systems", get(overview_api::systems))
        .route("/api/queues/{queue}/kinds", get(task_api::kinds))
        .route("/api/queues/{queue}/tasks/{id}", get(task_api::task))
        .route("/api/queues/{queue}/task", get(task_api::task_by_query))
        .route(
            "/api/queues/{queue}/tasks/batch",
            post(task_api::batch).get(task_api::task_named_batch),
        )
        .route(
            "/api/queues/{queue}/tasks/{id}/{action}",
            post(api::task_action),
        )
        .route(
            "/api/queues/{queue}/task/{action}",
            post(api::task_action_by_query),
        )
        .route("/api/queues/{queue}/run-all", post(api::run_all))
        .route("/api/queues/{queue}/delete-all", post(api::delete_all))
        .route("/api/queues/{queue}/pause", post(api::pause))
        .route("/api/queues/{queue}/unpause", post(api::unpause))
        .with_state(Arc::new(queue));
    Router::new()
        .route("/", get(move |req| page::index(read_only, req)))
        .route("/assets/dash.js", get(page::script))
        .route("/assets/chart.js", get(page::chart))
        .route("/assets/workers.js", get(page::workers_script))
        .route("/assets/views.js", get(page::views_script))
        .route("/assets/tasks.js", get(page::tasks_script))
        .route("/assets/dash.css", get(page::style))
        .route("/assets/favicon.svg", get(page::favicon))
        .merge(api_routes)
        .fallback(api::not_found)
        .method_not_allowed_fallback(api::wrong_method)
        .layer(axum::middleware::from_fn(limits::check))
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(guard),
            guard::check,
        ))
}

/// Runs the dashboard on `options.listen` until the server fails (the `dash` subcommand).
///
/// Refuses, before binding, a non-loopback address without a token
/// ([`DashError::TokenRequired`]), a blank token and a short one ([`DashError::ShortToken`]).
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
    let limits = server::Limits {
        header_timeout: options.header_timeout,
        write_timeout: options.write_timeout,
        max_connections: options.max_connections,
        max_connections_per_address: options.max_connections_per_address,
    };
    server::run(listener, app, limits)
        .await
        .map_err(DashError::Serve)
}
