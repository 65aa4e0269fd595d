//! The dashboard's HTTP side, over a real socket on 127.0.0.1: every API route with its status
//! and exact JSON, the token, read-only mode, the refusal of cross-origin POSTs and foreign
//! `Host` names, paging limits, bad input (4xx with a JSON error, never 500), a failed
//! database (503), and escaping. On SQLite, and on PostgreSQL (`RETRY_TEST_POSTGRES_URL`, or a
//! throwaway server on a machine with PostgreSQL; skipped loudly without either).

use retry_tests::durable_env::{Backend, pgbouncer_url_or_skip, postgres_url_or_skip};
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::StatusCode;
use retry_queue::dashboard::{self, DashError, DashOptions};
use retry_runtime::BoxError;
use retry_runtime::durable::{DelayRng, ManualClock, Queue, Task, TaskState, Worker, protocol};
use serde_json::{Value, json};

/// 2023-11-14 22:13:20 UTC: where every test's clock starts.
const T0_SECS: u64 = 1_700_000_000;
const HOSTILE: &str = "<script>alert(1)</script>";

retry_tests::both_backends!(
    overview_lists_every_queue_with_counts_and_daily_figures,
    history_counts_attempts_per_hour_or_day,
    tasks_of_a_state_come_as_exact_json,
    errors_are_grouped_by_last_err,
    task_actions_run_delete_and_archive,
    cancel_archives_a_waiting_task_and_asks_a_worker_to_stop_an_active_one,
    bulk_actions_and_pause,
    page_size_is_clamped_and_bad_pages_are_400,
    bad_ids_states_and_routes_are_4xx_json,
    a_token_guards_every_api_request,
    read_only_refuses_every_post,
    cross_origin_posts_and_foreign_hosts_are_refused,
    a_hostile_last_err_is_never_served_as_html,
    a_host_with_a_port_of_letters_is_refused,
    an_origin_of_the_other_scheme_is_refused,
    a_guessing_address_is_locked_out_even_with_the_right_token,
    dot_ids_and_ids_with_reserved_characters_are_acted_on,
    requests_the_document_allows_are_answered_and_those_it_forbids_are_refused,
);

/// A seeded queue (and a second, paused one) served by the dashboard on 127.0.0.1.
struct Dash {
    url: String,
    http: reqwest::Client,
    /// The seeded queue, at `T0 + 60 s` by its clock.
    q: Queue,
    /// The second queue's name.
    other: String,
    _dir: Option<tempfile::TempDir>,
}

fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(T0_SECS)
}

/// The database of `backend` with a queue of its own; `None` (said loudly) without PostgreSQL.
async fn database(
    backend: Backend,
    test: &str,
) -> Option<(Queue, String, Option<tempfile::TempDir>)> {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
            let q = Queue::connect(&url).await.expect("SQLite opens a new file");
            Some((q.named("default"), "emails".to_owned(), Some(dir)))
        }
        Backend::Postgres | Backend::PgBouncer => {
            // Through PgBouncer (transaction pooling), the dashboard's queue detects the pooler.
            let url = match backend {
                Backend::PgBouncer => pgbouncer_url_or_skip(&format!("dashboard_http::{test}"))?,
                _ => postgres_url_or_skip(&format!("dashboard_http::{test}"))?,
            };
            let q = Queue::connect(&url)
                .await
                .expect("the test PostgreSQL answers");
            let unique = format!("{}-{:016x}", std::process::id(), rand_u64());
            let name = format!("dash-{test}-{unique}");
            Some((q.named(name), format!("dash-other-{unique}"), None))
        }
    }
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    h.finish()
}

impl Dash {
    /// Seeds the queue at T0 (see below), moves its clock to T0 + 60 s and serves it with
    /// `options` (its `listen` is replaced by the bound address).
    ///
    /// - retry: `r1`, `r2` (kind `charge`, `last_err` "gateway down: 503", failed at T0, due at
    ///   T0 + 22 s), `x1` (`last_err` [`HOSTILE`], failed at T0 + 1 s)
    /// - archived: `a1` ("card expired", archived at T0 + 2 s)
    /// - pending: `p1` (kind `report`, no worker claims it), enqueued at T0 + 3 s
    /// - scheduled: `s1`, due at T0 + 300 s
    /// - completed: `c1` at T0 + 4 s
    /// - the other queue: paused, one pending task.
    async fn start(backend: Backend, test: &str, options: DashOptions) -> Option<Dash> {
        let (q, other, dir) = database(backend, test).await?;
        let clock = ManualClock::new(t0());
        let q = q.with_clock(clock.clone());
        let worker = Worker::new(q.clone())
            .rng(DelayRng::fixed(7))
            .handle("charge", |task| async move {
                let msg: String = task.payload()?;
                Err(BoxError::from(msg))
            })
            .handle("ok", |_task| async { Ok::<(), BoxError>(()) });
        let run = |task: Task| {
            let (q, worker) = (q.clone(), &worker);
            async move {
                q.enqueue(task).await.expect("enqueue");
                assert_eq!(worker.run_due().await.expect("run_due"), 1);
            }
        };
        run(Task::new("charge", &"gateway down: 503").task_id("r1")).await;
        run(Task::new("charge", &"gateway down: 503").task_id("r2")).await;
        clock.advance(Duration::from_secs(1));
        run(Task::new("charge", &HOSTILE).task_id("x1")).await;
        clock.advance(Duration::from_secs(1));
        run(Task::new("charge", &"card expired")
            .task_id("a1")
            .max_retry(0))
        .await;
        clock.advance(Duration::from_secs(1));
        q.enqueue(Task::new("report", &json!({"day": "2023-11-14"})).task_id("p1"))
            .await
            .unwrap();
        q.enqueue(
            Task::new("report", &1)
                .task_id("s1")
                .process_in(Duration::from_secs(297)),
        )
        .await
        .unwrap();
        clock.advance(Duration::from_secs(1));
        run(Task::new("ok", &0).task_id("c1")).await;
        let other_q = q.clone().named(other.clone());
        other_q
            .enqueue(Task::new("welcome", &"ada").task_id("e1"))
            .await
            .unwrap();
        other_q.inspector().pause().await.unwrap();
        clock.set(t0() + Duration::from_secs(60));
        Some(Dash::serve(q, other, dir, options).await)
    }

    async fn serve(
        q: Queue,
        other: String,
        dir: Option<tempfile::TempDir>,
        mut options: DashOptions,
    ) -> Dash {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        options.listen = addr;
        tokio::spawn(dashboard::serve_on(listener, q.clone(), options));
        Dash {
            url: format!("http://{addr}"),
            http: reqwest::Client::new(),
            q,
            other,
            _dir: dir,
        }
    }

    fn path(&self, rest: &str) -> String {
        let queue = self.q.name();
        format!("{}{}", self.url, rest.replace("{q}", queue))
    }

    async fn get(&self, rest: &str) -> (StatusCode, Value) {
        answer(self.http.get(self.path(rest)).send().await.unwrap()).await
    }

    async fn post(&self, rest: &str) -> (StatusCode, Value) {
        answer(self.http.post(self.path(rest)).send().await.unwrap()).await
    }

    /// The ids of the tasks of `state` (first page of 100).
    async fn ids(&self, state: &str) -> Vec<String> {
        let (status, body) = self
            .get(&format!("/api/queues/{{q}}/tasks?state={state}&size=100"))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    }
}

impl Dash {
    /// `GET rest`, a filtered list: its status, and its answer without `"stats"` and `"now"`
    /// (checked as [`Dash::get_with_stats`] does) when it is a 200.
    async fn get_found(&self, rest: &str) -> (StatusCode, Value) {
        let (status, body) = self.get(rest).await;
        if status != StatusCode::OK {
            return (status, body);
        }
        (status, self.get_with_stats(rest).await)
    }

    /// `GET rest` answered 200 with `"stats"` (the queue's object, as in `GET /api/queues`)
    /// and `"now"` (the queue clock's): the answer without those two, after checking them.
    async fn get_with_stats(&self, rest: &str) -> Value {
        let (status, mut body) = self.get(rest).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let map = body.as_object_mut().expect("an object");
        let stats = map.remove("stats").expect("the queue's stats");
        assert_eq!(map.remove("now"), Some(json!(at(60))), "{rest}");
        let (_, overview) = self.get("/api/queues").await;
        let listed = overview["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["queue"] == stats["queue"])
            .cloned();
        match listed {
            Some(listed) => assert_eq!(stats, listed, "{rest}"),
            // A queue nobody used: zero counts.
            None => assert_eq!(
                stats,
                json!({
                    "queue": stats["queue"],
                    "counts": {"pending": 0, "scheduled": 0, "active": 0, "retry": 0, "archived": 0, "completed": 0},
                    "paused": false, "processed_today": 0, "failed_today": 0, "workers": 0,
                    "oldest_pending_age_secs": null, "next_due_at": null, "running": 0,
                }),
            ),
        }
        body
    }
}

/// Status and JSON body; every answer of the API is JSON, errors included.
async fn answer(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = response.text().await.unwrap();
    assert!(
        content_type.starts_with("application/json"),
        "{status}: content-type {content_type:?}, body {text}"
    );
    let body: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (status, body)
}

/// An error answer: `status` and `{"error": "…"}` with one non-empty sentence.
fn assert_error(got: (StatusCode, Value), status: StatusCode) -> String {
    assert_eq!(got.0, status, "{}", got.1);
    let obj = got.1.as_object().expect("an object");
    assert_eq!(obj.len(), 1, "only `error`: {}", got.1);
    let msg = obj["error"].as_str().expect("a string").to_owned();
    assert!(!msg.is_empty());
    msg
}

/// `T0 + secs` in RFC 3339 (`secs` below an hour and a half).
fn at(secs: u64) -> String {
    let total = 22 * 3600 + 13 * 60 + 20 + secs;
    format!(
        "2023-11-14T{:02}:{:02}:{:02}Z",
        total / 3600,
        total / 60 % 60,
        total % 60
    )
}

async fn overview_lists_every_queue_with_counts_and_daily_figures(backend: Backend) {
    let Some(d) = Dash::start(backend, "overview", DashOptions::default()).await else {
        return;
    };
    let (status, body) = d.get("/api/queues").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["now"], json!(at(60)));
    let mine: Vec<&Value> = body["queues"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["queue"] == json!(d.q.name()) || s["queue"] == json!(d.other))
        .collect();
    let mut expected = [
        json!({
            "queue": d.q.name(),
            "counts": {"pending": 1, "scheduled": 1, "active": 0, "retry": 3, "archived": 1, "completed": 1},
            "paused": false,
            // Five attempts finished today: c1 completed, a1 archived, r1, r2 and x1 retried;
            // all but c1's failed.
            "processed_today": 5,
            "failed_today": 4,
            "oldest_pending_age_secs": 57,
            // r1 and r2 retry at T0 + 22 s (s1 is due later): the earliest due time.
            "next_due_at": at(22),
            "workers": 0,
            "running": 0,
        }),
        json!({
            "queue": d.other,
            "counts": {"pending": 1, "scheduled": 0, "active": 0, "retry": 0, "archived": 0, "completed": 0},
            "paused": true,
            "processed_today": 0,
            "failed_today": 0,
            "oldest_pending_age_secs": 56,
            "next_due_at": null,
            "workers": 0,
            "running": 0,
        }),
    ];
    expected.sort_by(|a, b| a["queue"].as_str().cmp(&b["queue"].as_str()));
    assert_eq!(mine, expected.iter().collect::<Vec<_>>());
}

async fn history_counts_attempts_per_hour_or_day(backend: Backend) {
    let Some(d) = Dash::start(backend, "history", DashOptions::default()).await else {
        return;
    };
    // The clock reads 22:14:20 on 2023-11-14; every attempt finished in the 22:00 hour.
    let (status, body) = d.get("/api/queues/{q}/history").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["queue"], json!(d.q.name()));
    assert_eq!(body["hours"], json!(24));
    let buckets = body["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 24);
    assert_eq!(buckets[0]["start"], json!("2023-11-13T23:00:00Z"));
    assert_eq!(
        buckets[23],
        json!({"start": "2023-11-14T22:00:00Z", "processed": 5, "failed": 4})
    );
    assert!(
        buckets[..23]
            .iter()
            .all(|b| b["processed"] == json!(0) && b["failed"] == json!(0))
    );

    let (status, body) = d.get("/api/queues/{q}/history?days=2").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"queue": d.q.name(), "days": 2, "buckets": [
            {"start": "2023-11-13T00:00:00Z", "processed": 0, "failed": 0},
            {"start": "2023-11-14T00:00:00Z", "processed": 5, "failed": 4},
        ]})
    );
    // The other queue ran nothing.
    let (_, body) = d
        .get(&format!("/api/queues/{}/history?hours=1", d.other))
        .await;
    assert_eq!(
        body["buckets"],
        json!([{"start": "2023-11-14T22:00:00Z", "processed": 0, "failed": 0}])
    );

    for bad in [
        "hours=0",
        "hours=169",
        "days=0",
        "days=91",
        "hours=x",
        "days=-1",
    ] {
        let (status, body) = d.get(&format!("/api/queues/{{q}}/history?{bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert!(
            body["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{bad}"
        );
    }
}

async fn tasks_of_a_state_come_as_exact_json(backend: Backend) {
    let Some(d) = Dash::start(backend, "tasks", DashOptions::default()).await else {
        return;
    };
    let body = d
        .get_with_stats("/api/queues/{q}/tasks?state=retry&page=1&size=2")
        .await;
    let queue = d.q.name();
    // Opaque (it holds the row's sequence number, which differs by backend).
    let next = body["next"].as_str().expect("a next cursor").to_owned();
    assert_eq!(
        body,
        json!({
            "next": next,
            "tasks": [
                {
                    "id": "r1", "queue": queue, "kind": "charge", "state": "retry",
                    "retried": 1, "max_retry": 25, "payload": "\"gateway down: 503\"",
                    "enqueued_at": at(0), "next_process_at": at(22),
                    "last_err": "gateway down: 503", "last_failed_at": at(0), "completed_at": null,
                    "lease_expires_at": null, "errors": [{"retried": 0, "at": at(0), "error": "gateway down: 503"}],
                },
                {
                    "id": "r2", "queue": queue, "kind": "charge", "state": "retry",
                    "retried": 1, "max_retry": 25, "payload": "\"gateway down: 503\"",
                    "enqueued_at": at(0), "next_process_at": at(22),
                    "last_err": "gateway down: 503", "last_failed_at": at(0), "completed_at": null,
                    "lease_expires_at": null, "errors": [{"retried": 0, "at": at(0), "error": "gateway down: 503"}],
                },
            ],
            "total": 3,
            "actions": {"task": ["run", "delete", "archive", "cancel"], "bulk": ["run-all", "delete-all"]},
        })
    );
    let (_, page2) = d
        .get("/api/queues/{q}/tasks?state=retry&page=2&size=2")
        .await;
    assert_eq!(page2["total"], json!(3));
    assert_eq!(page2["tasks"][0]["id"], json!("x1"));
    assert_eq!(page2["tasks"][0]["last_err"], json!(HOSTILE));
    assert_eq!(page2["tasks"].as_array().unwrap().len(), 1);
    let (_, after) = d
        .get(&format!(
            "/api/queues/{{q}}/tasks?state=retry&size=2&after={next}"
        ))
        .await;
    assert_eq!(after["tasks"], page2["tasks"]);
    assert_eq!(after["next"], Value::Null);

    let (_, completed) = d.get("/api/queues/{q}/tasks?state=completed").await;
    assert_eq!(completed["total"], json!(1));
    assert_eq!(completed["tasks"][0]["completed_at"], json!(at(4)));
    assert_eq!(completed["tasks"][0]["next_process_at"], Value::Null);
    let (_, pending) = d.get("/api/queues/{q}/tasks?state=pending").await;
    assert_eq!(
        pending["tasks"][0]["payload"],
        json!(r#"{"day":"2023-11-14"}"#)
    );
    assert_eq!(d.ids("scheduled").await, ["s1"]);
    assert_eq!(d.ids("archived").await, ["a1"]);
    assert_eq!(d.ids("active").await, Vec::<String>::new());
    // A queue nobody used is empty, not an error.
    let empty = d
        .get_with_stats("/api/queues/nobody-here/tasks?state=retry")
        .await;
    assert_eq!(
        empty,
        json!({
            "tasks": [],
            "next": null,
            "total": 0,
            "actions": {"task": ["run", "delete", "archive", "cancel"], "bulk": ["run-all", "delete-all"]},
        })
    );
    // The actions follow the state: only "cancel" on active tasks, no "run" for pending ones.
    let (_, active) = d.get("/api/queues/{q}/tasks?state=active").await;
    assert_eq!(active["actions"], json!({"task": ["cancel"], "bulk": []}));
    let (_, pending) = d.get("/api/queues/{q}/tasks?state=pending").await;
    assert_eq!(
        pending["actions"],
        json!({"task": ["delete", "archive", "cancel"], "bulk": ["delete-all"]})
    );
}

async fn cancel_archives_a_waiting_task_and_asks_a_worker_to_stop_an_active_one(backend: Backend) {
    let Some(d) = Dash::start(backend, "cancel", DashOptions::default()).await else {
        return;
    };
    let queue = d.q.name().to_owned();
    assert_eq!(
        d.post("/api/queues/{q}/tasks/s1/cancel").await,
        (
            StatusCode::OK,
            json!({"queue": queue, "id": "s1", "action": "cancel"})
        )
    );
    let s1 = d.q.inspector().get("s1").await.unwrap().unwrap();
    assert_eq!(s1.state, TaskState::Archived);
    assert_eq!(s1.last_err.as_deref(), Some("(canceled by operator)"));
    // Ended tasks: 400; an unknown id: 404 (JSON errors naming the task).
    for id in ["c1", "s1"] {
        let msg = assert_error(
            d.post(&format!("/api/queues/{{q}}/tasks/{id}/cancel"))
                .await,
            StatusCode::BAD_REQUEST,
        );
        assert!(msg.contains("can be canceled"), "{msg}");
    }
    let msg = assert_error(
        d.post("/api/queues/{q}/tasks/nope/cancel").await,
        StatusCode::NOT_FOUND,
    );
    assert!(msg.contains("nope"), "{msg}");
    // An active task: accepted, the worker holding it stops it.
    let claimed = protocol::claim(&d.q, 1, Duration::from_secs(30))
        .await
        .unwrap();
    let active = claimed[0].id().to_owned();
    assert_eq!(
        d.post(&format!("/api/queues/{{q}}/tasks/{active}/cancel"))
            .await,
        (
            StatusCode::OK,
            json!({"queue": queue, "id": active, "action": "cancel"})
        )
    );
    assert_eq!(
        d.q.inspector().get(&active).await.unwrap().unwrap().state,
        TaskState::Active,
        "until its worker stops it"
    );
}

async fn errors_are_grouped_by_last_err(backend: Backend) {
    let Some(d) = Dash::start(backend, "errors", DashOptions::default()).await else {
        return;
    };
    let retry = json!({
        "queue": d.q.name(),
        "state": "retry",
        "groups": [
            {"last_err": "gateway down: 503", "count": 2, "oldest": at(0), "newest": at(0)},
            {"last_err": HOSTILE, "count": 1, "oldest": at(1), "newest": at(1)},
        ],
    });
    assert_eq!(
        d.get_with_stats("/api/queues/{q}/errors?state=retry").await,
        retry
    );
    // Retry is the default.
    assert_eq!(d.get_with_stats("/api/queues/{q}/errors").await, retry);
    let archived = json!({"queue": d.q.name(), "state": "archived", "groups": [
        {"last_err": "card expired (retries exhausted: 0 of 0)", "count": 1, "oldest": at(2), "newest": at(2)},
    ]});
    assert_eq!(
        d.get_with_stats("/api/queues/{q}/errors?state=archived")
            .await,
        archived
    );
    // Several states in one answer (the page's Failing view: one request).
    let both = d
        .get_with_stats("/api/queues/{q}/errors?states=retry,archived")
        .await;
    let without_queue = |mut v: Value| {
        v.as_object_mut().unwrap().remove("queue");
        v
    };
    assert_eq!(
        both,
        json!({"queue": d.q.name(), "states": [without_queue(retry), without_queue(archived)]})
    );
    for bad in [
        "/api/queues/{q}/errors?states=retry,dead",
        "/api/queues/{q}/errors?states=retry,retry",
        "/api/queues/{q}/errors?states=",
    ] {
        assert_error(d.get(bad).await, StatusCode::BAD_REQUEST);
    }
    assert_error(
        d.get("/api/queues/{q}/errors?state=failing").await,
        StatusCode::BAD_REQUEST,
    );
}

async fn task_actions_run_delete_and_archive(backend: Backend) {
    let Some(d) = Dash::start(backend, "actions", DashOptions::default()).await else {
        return;
    };
    let queue = d.q.name().to_owned();
    assert_eq!(
        d.post("/api/queues/{q}/tasks/r1/run").await,
        (
            StatusCode::OK,
            json!({"queue": queue, "id": "r1", "action": "run"})
        )
    );
    assert_eq!(
        d.q.inspector().get("r1").await.unwrap().unwrap().state,
        TaskState::Pending
    );
    assert_eq!(
        d.post("/api/queues/{q}/tasks/r2/archive").await,
        (
            StatusCode::OK,
            json!({"queue": queue, "id": "r2", "action": "archive"})
        )
    );
    assert_eq!(d.ids("archived").await, ["r2", "a1"]);
    assert_eq!(
        d.post("/api/queues/{q}/tasks/a1/delete").await,
        (
            StatusCode::OK,
            json!({"queue": queue, "id": "a1", "action": "delete"})
        )
    );
    assert!(d.q.inspector().get("a1").await.unwrap().is_none());
    // Unknown ids: 404, for each action.
    for action in ["run", "delete", "archive"] {
        let msg = assert_error(
            d.post(&format!("/api/queues/{{q}}/tasks/a1/{action}"))
                .await,
            StatusCode::NOT_FOUND,
        );
        assert!(msg.contains("a1"), "{msg}");
    }
    // An id with a slash, encoded.
    assert_error(
        d.post("/api/queues/{q}/tasks/no%2Fsuch/run").await,
        StatusCode::NOT_FOUND,
    );
    // Archiving a completed task: 400; acting on an active one: 409.
    assert_error(
        d.post("/api/queues/{q}/tasks/c1/archive").await,
        StatusCode::BAD_REQUEST,
    );
    let claimed = protocol::claim(&d.q, 10, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(!claimed.is_empty());
    let active = claimed[0].id().to_owned();
    for action in ["run", "delete", "archive"] {
        assert_error(
            d.post(&format!("/api/queues/{{q}}/tasks/{active}/{action}"))
                .await,
            StatusCode::CONFLICT,
        );
    }
}

async fn bulk_actions_and_pause(backend: Backend) {
    let Some(d) = Dash::start(backend, "bulk", DashOptions::default()).await else {
        return;
    };
    let queue = d.q.name().to_owned();
    assert_eq!(
        d.post("/api/queues/{q}/run-all?state=retry").await,
        (
            StatusCode::OK,
            json!({"queue": queue, "state": "retry", "count": 3})
        )
    );
    assert_eq!(d.ids("retry").await, Vec::<String>::new());
    assert_eq!(d.ids("pending").await.len(), 4);
    assert_eq!(
        d.post("/api/queues/{q}/delete-all?state=archived").await,
        (
            StatusCode::OK,
            json!({"queue": queue, "state": "archived", "count": 1})
        )
    );
    assert_eq!(d.ids("archived").await, Vec::<String>::new());
    // The state is required, must be known, and must fit the action.
    for bad in [
        "/api/queues/{q}/run-all",
        "/api/queues/{q}/run-all?state=bogus",
        "/api/queues/{q}/run-all?state=active",
        "/api/queues/{q}/run-all?state=pending",
        "/api/queues/{q}/delete-all",
        "/api/queues/{q}/delete-all?state=active",
        "/api/queues/{q}/delete-all?state=Archived%20",
    ] {
        assert_error(d.post(bad).await, StatusCode::BAD_REQUEST);
    }

    assert_eq!(
        d.post("/api/queues/{q}/pause").await,
        (StatusCode::OK, json!({"queue": queue, "paused": true}))
    );
    assert!(d.q.inspector().is_paused().await.unwrap());
    let (_, all) = d.get("/api/queues").await;
    let mine = all["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["queue"] == json!(queue))
        .unwrap();
    assert_eq!(mine["paused"], json!(true));
    assert_eq!(
        d.post("/api/queues/{q}/unpause").await,
        (StatusCode::OK, json!({"queue": queue, "paused": false}))
    );
    assert!(!d.q.inspector().is_paused().await.unwrap());
    let other = d.other.clone();
    assert_eq!(
        d.post(&format!("/api/queues/{other}/unpause")).await,
        (StatusCode::OK, json!({"queue": other, "paused": false}))
    );
}

async fn page_size_is_clamped_and_bad_pages_are_400(backend: Backend) {
    let Some(d) = Dash::start(backend, "paging", DashOptions::default()).await else {
        return;
    };
    for n in 0..130 {
        d.q.enqueue(Task::new("bulk", &n).task_id(format!("b{n:03}")))
            .await
            .unwrap();
    }
    let (status, body) = d.get("/api/queues/{q}/tasks?state=pending&size=500").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["total"], json!(131));
    assert_eq!(body["tasks"].as_array().unwrap().len(), 100);
    // Up to the 1 000 a request may ask for; more is refused (the size is a type: 1 to 1 000).
    let (status, huge) = d.get("/api/queues/{q}/tasks?state=pending&size=1000").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(huge["tasks"].as_array().unwrap().len(), 100);
    for size in ["1001", "99999999999999999999"] {
        let msg = assert_error(
            d.get(&format!(
                "/api/queues/{{q}}/tasks?state=pending&size={size}"
            ))
            .await,
            StatusCode::BAD_REQUEST,
        );
        assert!(msg.contains("from 1 to 1000"), "{msg}");
    }
    let (_, page2) = d
        .get("/api/queues/{q}/tasks?state=pending&size=100&page=2")
        .await;
    assert_eq!(page2["tasks"].as_array().unwrap().len(), 31);
    assert_eq!(page2["next"], Value::Null);
    // The same page by cursor, and the cursor and a page number together refused.
    let next = huge["next"].as_str().expect("a next cursor");
    let (_, after) = d
        .get(&format!(
            "/api/queues/{{q}}/tasks?state=pending&size=100&after={next}"
        ))
        .await;
    assert_eq!(after["tasks"], page2["tasks"]);
    let (status, both) = d
        .get(&format!(
            "/api/queues/{{q}}/tasks?state=pending&page=2&after={next}"
        ))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{both}");
    let (status, bad) = d
        .get("/api/queues/{q}/tasks?state=pending&after=page-2")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .contains("is not a page cursor"),
        "{bad}"
    );
    // Defaults: page 1 of 20.
    let (_, default) = d.get("/api/queues/{q}/tasks?state=pending").await;
    assert_eq!(default["tasks"].as_array().unwrap().len(), 20);
    assert_eq!(default["tasks"][0]["id"], json!("p1"));
    // Past the end: an empty page.
    let (status, past) = d.get("/api/queues/{q}/tasks?state=pending&page=99").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(past["tasks"], json!([]));
    for bad in [
        "page=0",
        "page=-1",
        "page=abc",
        "page=",
        "size=0",
        "size=ten",
        "page=99999999999",
        "page=1.0",
        "page=%2B1",
        "size=-5",
        "size=000",
    ] {
        let msg = assert_error(
            d.get(&format!("/api/queues/{{q}}/tasks?state=pending&{bad}"))
                .await,
            StatusCode::BAD_REQUEST,
        );
        assert!(msg.contains("page") || msg.contains("size"), "{msg}");
    }
}

async fn bad_ids_states_and_routes_are_4xx_json(backend: Backend) {
    let Some(d) = Dash::start(backend, "bad-input", DashOptions::default()).await else {
        return;
    };
    let msg = assert_error(
        d.get("/api/queues/{q}/tasks?state=dead").await,
        StatusCode::BAD_REQUEST,
    );
    assert!(msg.contains("dead"), "{msg}");
    assert_error(
        d.get("/api/queues/{q}/tasks").await,
        StatusCode::BAD_REQUEST,
    );
    // A queue name above 1 KiB.
    let long = "q".repeat(2000);
    assert_error(
        d.get(&format!("/api/queues/{long}/tasks?state=retry"))
            .await,
        StatusCode::BAD_REQUEST,
    );
    assert_error(
        d.post(&format!("/api/queues/{long}/pause")).await,
        StatusCode::BAD_REQUEST,
    );
    // A path that is not UTF-8 once decoded.
    assert_error(
        d.get("/api/queues/%FF/tasks?state=retry").await,
        StatusCode::BAD_REQUEST,
    );
    // A huge id is just unknown.
    let huge = "i".repeat(5000);
    assert_error(
        d.post(&format!("/api/queues/{{q}}/tasks/{huge}/run")).await,
        StatusCode::NOT_FOUND,
    );
    // An unknown action: 400, naming the actions.
    let msg = assert_error(
        d.post("/api/queues/{q}/tasks/r1/explode").await,
        StatusCode::BAD_REQUEST,
    );
    assert!(
        msg.contains("`run`, `delete`, `archive`, `cancel`"),
        "{msg}"
    );
    // Unknown routes: 404; a known route with the wrong method: 405.
    for route in ["/api/nothing", "/api/queues/{q}"] {
        assert_error(d.post(route).await, StatusCode::NOT_FOUND);
    }
    assert_error(
        d.get("/api/queues/{q}/tasks/r1/run").await,
        StatusCode::METHOD_NOT_ALLOWED,
    );
    assert_error(d.post("/api/queues").await, StatusCode::METHOD_NOT_ALLOWED);
}

async fn a_token_guards_every_api_request(backend: Backend) {
    let options = DashOptions {
        token: Some("s3cret-token-0123".into()),
        ..DashOptions::default()
    };
    let Some(d) = Dash::start(backend, "token", options).await else {
        return;
    };
    let routes = [
        ("GET", "/api/queues"),
        ("GET", "/api/queues/{q}/tasks?state=retry"),
        ("GET", "/api/queues/{q}/errors?state=retry"),
        ("GET", "/api/workers"),
        ("GET", "/api/schedulers"),
        ("GET", "/api/queues/{q}/history?hours=24"),
        ("POST", "/api/queues/{q}/tasks/r1/run"),
        ("POST", "/api/queues/{q}/tasks/r1/delete"),
        ("POST", "/api/queues/{q}/tasks/r1/archive"),
        ("POST", "/api/queues/{q}/task/run?id=r1"),
        ("POST", "/api/queues/{q}/task/delete?id=r1"),
        ("GET", "/api/queues/{q}/errors?states=retry,archived"),
        ("POST", "/api/queues/{q}/run-all?state=retry"),
        ("POST", "/api/queues/{q}/delete-all?state=retry"),
        ("POST", "/api/queues/{q}/pause"),
        ("POST", "/api/queues/{q}/unpause"),
        ("GET", "/api/openapi.json"),
        ("GET", "/api/no-such-route"),
    ];
    // Wrong bearer tokens are counted: the 10th locks this address out (429 to every request
    // from it after that); no token, or another scheme, guesses nothing and is not counted.
    let mut wrong = 0;
    let guesses = routes.len() as u32;
    for (method, route) in routes {
        for auth in [
            None,
            Some("Bearer wrong"),
            Some("s3cret-token-0123"),
            Some("Basic s3cret-token-0123"),
        ] {
            let mut req = d.http.request(method.parse().unwrap(), d.path(route));
            if let Some(auth) = auth {
                req = req.header("authorization", auth);
            }
            let response = req.send().await.unwrap();
            let guess = auth.is_some_and(|a| a.starts_with("Bearer "));
            let locked = wrong >= 10;
            wrong += u32::from(guess);
            if locked {
                let secs: u64 = response.headers()["retry-after"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!((1..=5).contains(&secs), "{secs}");
                assert_error(answer(response).await, StatusCode::TOO_MANY_REQUESTS);
                continue;
            }
            assert_eq!(
                response.headers().get("www-authenticate").unwrap(),
                "Bearer"
            );
            assert_error(answer(response).await, StatusCode::UNAUTHORIZED);
        }
    }
    assert_eq!(wrong, guesses);
    // Nothing happened.
    assert_eq!(
        d.q.inspector().get("r1").await.unwrap().unwrap().state,
        TaskState::Retry
    );
    assert!(!d.q.inspector().is_paused().await.unwrap());

    // 127.0.0.1 is locked out now, the right token included: an operator on another address.
    let operator = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let ok = operator
        .get(d.path("/api/queues"))
        .bearer_auth("s3cret-token-0123")
        .send()
        .await
        .unwrap();
    assert_eq!(answer(ok).await.0, StatusCode::OK);
    let run = operator
        .post(d.path("/api/queues/{q}/tasks/r1/run"))
        .bearer_auth("s3cret-token-0123")
        .send()
        .await
        .unwrap();
    assert_eq!(answer(run).await.0, StatusCode::OK);
    // The page (no data in it) loads without the token, and does not contain it.
    let page = d.http.get(d.path("/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    assert!(html.contains("id=\"login\""));
    assert!(!html.contains("s3cret-token-0123"));
}

async fn read_only_refuses_every_post(backend: Backend) {
    let options = DashOptions {
        read_only: true,
        ..DashOptions::default()
    };
    let Some(d) = Dash::start(backend, "read-only", options).await else {
        return;
    };
    for route in [
        "/api/queues/{q}/tasks/r1/run",
        "/api/queues/{q}/tasks/r1/delete",
        "/api/queues/{q}/tasks/r1/archive",
        "/api/queues/{q}/tasks/r1/cancel",
        "/api/queues/{q}/task/run?id=r1",
        "/api/queues/{q}/task/delete?id=r1",
        "/api/queues/{q}/task/archive?id=r1",
        "/api/queues/{q}/task/cancel?id=r1",
        "/api/queues/{q}/run-all?state=retry",
        "/api/queues/{q}/delete-all?state=archived",
        "/api/queues/{q}/pause",
        "/api/queues/{q}/unpause",
    ] {
        let msg = assert_error(d.post(route).await, StatusCode::FORBIDDEN);
        assert!(msg.contains("read-only"), "{msg}");
    }
    assert_eq!(
        d.q.inspector().get("r1").await.unwrap().unwrap().state,
        TaskState::Retry
    );
    assert_eq!(d.ids("archived").await, ["a1"]);
    assert!(!d.q.inspector().is_paused().await.unwrap());
    assert_eq!(d.get("/api/queues").await.0, StatusCode::OK);
    let html = d
        .http
        .get(d.path("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains(r#"data-read-only="true""#), "{html}");
}

async fn cross_origin_posts_and_foreign_hosts_are_refused(backend: Backend) {
    let Some(d) = Dash::start(backend, "origin", DashOptions::default()).await else {
        return;
    };
    let own = d.url.clone();
    let post = |headers: Vec<(&'static str, String)>| {
        let mut req = d.http.post(d.path("/api/queues/{q}/pause"));
        for (name, value) in headers {
            req = req.header(name, value);
        }
        async move { answer(req.send().await.unwrap()).await }
    };
    for refused in [
        vec![("origin", "http://evil.test".to_owned())],
        vec![("origin", "null".to_owned())],
        vec![("origin", own.replace("127.0.0.1", "localhost"))],
        vec![("origin", "http://127.0.0.1:1".to_owned())],
        vec![("sec-fetch-site", "cross-site".to_owned())],
        vec![("sec-fetch-site", "same-site".to_owned())],
        vec![("referer", "http://evil.test/page".to_owned())],
    ] {
        let msg = assert_error(post(refused.clone()).await, StatusCode::FORBIDDEN);
        assert!(msg.contains("cross-origin"), "{refused:?}: {msg}");
    }
    assert!(!d.q.inspector().is_paused().await.unwrap());
    for route in [
        "/api/queues/{q}/tasks/r1/cancel",
        "/api/queues/{q}/task/cancel?id=r1",
        "/api/queues/{q}/task/delete?id=r1",
    ] {
        let refused = d
            .http
            .post(d.path(route))
            .header("origin", "http://evil.test")
            .send()
            .await
            .unwrap();
        assert_error(answer(refused).await, StatusCode::FORBIDDEN);
    }
    assert_eq!(
        d.q.inspector().get("r1").await.unwrap().unwrap().state,
        TaskState::Retry
    );
    // The page's own requests, and scripts without any of these headers, pass.
    for allowed in [
        vec![("origin", own.clone())],
        vec![("sec-fetch-site", "same-origin".to_owned())],
        vec![("referer", format!("{own}/#/q/default/retry"))],
        vec![],
    ] {
        assert_eq!(post(allowed).await.0, StatusCode::OK);
    }
    // A token-less dashboard answers only to loopback host names (no DNS rebinding).
    let rebound = d
        .http
        .get(d.path("/api/queues"))
        .header("host", "evil.test")
        .send()
        .await
        .unwrap();
    assert_error(answer(rebound).await, StatusCode::FORBIDDEN);
    let localhost = d
        .http
        .get(d.path("/api/queues"))
        .header("host", "localhost")
        .send()
        .await
        .unwrap();
    assert_eq!(answer(localhost).await.0, StatusCode::OK);
}

async fn a_hostile_last_err_is_never_served_as_html(backend: Backend) {
    let Some(d) = Dash::start(backend, "escaping", DashOptions::default()).await else {
        return;
    };
    // Every HTML the server renders.
    for path in ["/", "/?x=<script>alert(1)</script>"] {
        let response = d.http.get(d.path(path)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let csp = response.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        let html = response.text().await.unwrap();
        assert!(!html.contains(HOSTILE));
        assert!(!html.contains("alert("));
    }
    // The API carries the text as a JSON string, never as something a browser would render.
    for path in [
        "/api/queues/{q}/tasks?state=retry",
        "/api/queues/{q}/errors?state=retry",
    ] {
        let response = d.http.get(d.path(path)).send().await.unwrap();
        assert_eq!(response.headers()["x-content-type-options"], "nosniff");
        let (status, body) = answer(response).await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.to_string().contains(&HOSTILE.replace('"', "\\\"")));
    }
    // The script writes values as text only.
    let script = d
        .http
        .get(d.path("/assets/dash.js"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!script.contains("innerHTML"));
    assert!(!script.contains("insertAdjacentHTML"));
    assert!(!script.contains("document.write"));
}

#[tokio::test]
async fn a_failed_database_answers_503() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let q = Queue::connect(&url).await.unwrap();
    q.close().await;
    let d = Dash::serve(q, "other".into(), Some(dir), DashOptions::default()).await;
    for path in ["/api/queues", "/api/queues/default/tasks?state=retry"] {
        let msg = assert_error(d.get(path).await, StatusCode::SERVICE_UNAVAILABLE);
        assert!(msg.contains("database"), "{msg}");
    }
    assert_error(
        d.post("/api/queues/default/tasks/x/run").await,
        StatusCode::SERVICE_UNAVAILABLE,
    );
}

/// Issue 41, item 5: the database file deleted under a running dashboard. Within a bounded
/// wait (the file is looked at once a second), every call answers 503 with a JSON error
/// naming the file, never 500 (nor, as before, 200 from the deleted file).
#[tokio::test]
async fn a_deleted_database_file_answers_503_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tasks.db");
    let q = Queue::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    let d = Dash::serve(q, "other".into(), None, DashOptions::default()).await;
    assert_eq!(d.get("/api/queues").await.0, StatusCode::OK);
    std::fs::remove_file(&db).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut got = d.get("/api/queues").await;
    while got.0 == StatusCode::OK && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        got = d.get("/api/queues").await;
    }
    let msg = assert_error(got, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        msg.contains(&format!("{} was deleted", db.display())),
        "{msg}"
    );
    assert_error(
        d.post("/api/queues/default/tasks/x/run").await,
        StatusCode::SERVICE_UNAVAILABLE,
    );
}

#[tokio::test]
async fn serve_refuses_a_public_address_without_a_token_before_binding() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let q = Queue::connect(&url).await.unwrap();
    let public = DashOptions {
        listen: "0.0.0.0:0".parse().unwrap(),
        ..DashOptions::default()
    };
    let refused = tokio::time::timeout(Duration::from_secs(5), dashboard::serve(q.clone(), public))
        .await
        .expect("refused at once");
    let Err(e @ DashError::TokenRequired { .. }) = refused else {
        panic!("{refused:?}");
    };
    assert!(e.to_string().contains("--token"), "{e}");
    let blank = DashOptions {
        listen: "0.0.0.0:0".parse().unwrap(),
        token: Some("  ".into()),
        ..DashOptions::default()
    };
    assert!(matches!(
        dashboard::serve(q.clone(), blank).await,
        Err(DashError::BlankToken)
    ));
    // The defaults: 127.0.0.1:8080, writable, no token; accepted.
    let defaults = DashOptions::default();
    assert_eq!(defaults.listen, "127.0.0.1:8080".parse().unwrap());
    assert!(defaults.check().is_ok());
    let with_token = DashOptions {
        listen: "0.0.0.0:0".parse().unwrap(),
        token: Some("sixteen-chars-ok".into()),
        ..DashOptions::default()
    };
    assert!(with_token.check().is_ok());
    let v6 = DashOptions {
        listen: "[::]:0".parse().unwrap(),
        ..DashOptions::default()
    };
    assert!(matches!(v6.check(), Err(DashError::TokenRequired { .. })));
}

#[tokio::test]
async fn the_router_mounts_under_a_path() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let q = Queue::connect(&url).await.unwrap();
    q.enqueue(Task::new("job", &1).task_id("j1")).await.unwrap();
    let app = axum::Router::new().nest("/ops/queue", dashboard::router(q));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let http = reqwest::Client::new();
    let html = http
        .get(format!("http://{addr}/ops/queue"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains(r#"data-base="/ops/queue""#), "{html}");
    assert!(
        html.contains(r#"src="/ops/queue/assets/dash.js""#),
        "{html}"
    );
    let script = http
        .get(format!("http://{addr}/ops/queue/assets/dash.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), StatusCode::OK);
    let (status, body) = answer(
        http.get(format!(
            "http://{addr}/ops/queue/api/queues/default/tasks?state=pending"
        ))
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["tasks"][0]["id"], json!("j1"));
}

// ---------------------------------------------------------------------------------------------
// Who runs (issue 23, items 2, 3 and 9): GET /api/workers, GET /api/schedulers, and the
// `workers` count of each queue in GET /api/queues.

mod presence {
    use super::*;

    retry_tests::both_backends!(
        workers_and_schedulers_come_as_exact_json,
        presence_routes_answer_in_read_only_mode_and_unknown_ones_are_404,
        a_claim_of_three_tasks_shows_three_busy_slots,
        prefetched_tasks_are_active_but_not_running,
    );

    /// A worker of one slot that prefetches two: three tasks active in the database, one
    /// running. `running` says so (the Active tab showed 3 as if all ran: "Active 15 with 3
    /// running").
    async fn prefetched_tasks_are_active_but_not_running(backend: Backend) {
        let Some(d) = Dash::start(backend, "prefetch", DashOptions::default()).await else {
            return;
        };
        let q = d.q.clone().named(format!("{}-prefetch", d.q.name()));
        for n in 1..=3 {
            q.enqueue(Task::new("slow", &n).task_id(format!("p{n}")))
                .await
                .unwrap();
        }
        let release = std::sync::Arc::new(tokio::sync::Notify::new());
        let held = release.clone();
        let worker = Worker::new(q.clone())
            .concurrency(1)
            .prefetch(2)
            .poll_interval(Duration::from_millis(10))
            .heartbeat_interval(Duration::from_millis(20))
            .handle("slow", move |_task| {
                let held = held.clone();
                async move {
                    held.notified().await;
                    Ok::<(), BoxError>(())
                }
            });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(worker.run_until(async {
            stopped.await.ok();
        }));
        let mut row = Value::Null;
        for _ in 0..2_000 {
            let (_, body) = d.get("/api/queues").await;
            row = body["queues"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["queue"] == json!(q.name()))
                .cloned()
                .unwrap_or(Value::Null);
            if row["counts"]["active"] == json!(3) && row["running"] == json!(1) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            (
                &row["counts"]["active"],
                &row["counts"]["pending"],
                &row["running"]
            ),
            (&json!(3), &json!(0), &json!(1)),
            "{row}"
        );
        // The Active tab's answer names the one that runs (the page marks the others waiting).
        let path = format!("/api/queues/{}/tasks?state=active", q.name());
        let (status, page) = d.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let runs = page["running"].as_array().expect("running ids").clone();
        assert_eq!(runs.len(), 1, "{page}");
        let ids: Vec<&Value> = page["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| &t["id"])
            .collect();
        assert_eq!(ids.len(), 3, "{page}");
        assert!(ids.contains(&&runs[0]), "{page}");
        // Another state's answer has no `running`.
        let path = format!("/api/queues/{}/tasks?state=pending", q.name());
        assert_eq!(d.get(&path).await.1.get("running"), None);
        stop.send(()).unwrap();
        release.notify_waiters();
        running.await.unwrap().unwrap();
    }

    /// One claim takes three tasks under one lease token; each runs in its own slot, and the
    /// worker's row lists the three (it listed one, keyed by the shared token: BUSY 1/3).
    async fn a_claim_of_three_tasks_shows_three_busy_slots(backend: Backend) {
        let Some(d) = Dash::start(backend, "three", DashOptions::default()).await else {
            return;
        };
        let q = d.q.clone().named(format!("{}-three", d.q.name()));
        for n in 1..=3 {
            q.enqueue(Task::new("slow", &n).task_id(format!("t{n}")))
                .await
                .unwrap();
        }
        let release = std::sync::Arc::new(tokio::sync::Notify::new());
        let started = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
        let (held, began) = (release.clone(), started.clone());
        let worker = Worker::new(q.clone())
            .concurrency(3)
            .poll_interval(Duration::from_millis(10))
            .heartbeat_interval(Duration::from_millis(20))
            .handle("slow", move |_task| {
                let (held, began) = (held.clone(), began.clone());
                async move {
                    began.add_permits(1);
                    held.notified().await;
                    Ok::<(), BoxError>(())
                }
            });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(worker.run_until(async {
            stopped.await.ok();
        }));
        // The three attempts run at once.
        let all = tokio::time::timeout(Duration::from_secs(30), started.acquire_many(3)).await;
        all.expect("three attempts started").unwrap().forget();
        let mut ids: Vec<Value> = Vec::new();
        for _ in 0..2_000 {
            let seen = workers_serving(&d, q.name()).await;
            ids = seen
                .iter()
                .flat_map(|w| {
                    w["active"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|t| t["id"].clone())
                })
                .collect();
            if ids.len() == 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        ids.sort_by_key(|id| id.to_string());
        assert_eq!(ids, [json!("t1"), json!("t2"), json!("t3")]);
        // The queue's figures: three active, the three running (none merely prefetched).
        let (_, body) = d.get("/api/queues").await;
        let row = body["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["queue"] == json!(q.name()))
            .cloned()
            .unwrap();
        assert_eq!(
            (&row["counts"]["active"], &row["running"]),
            (&json!(3), &json!(3))
        );
        release.notify_waiters();
        stop.send(()).unwrap();
        running.await.unwrap().unwrap();
    }

    /// The live workers of the answer that serve `queue`.
    async fn workers_serving(d: &Dash, queue: &str) -> Vec<Value> {
        let (status, body) = d.get("/api/workers").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body.as_object().unwrap().len(), 1, "only `workers`: {body}");
        body["workers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["queues"].as_array().unwrap().contains(&json!(queue)))
            .cloned()
            .collect()
    }

    /// The `workers` figure of `queue` in GET /api/queues.
    async fn workers_of_queue(d: &Dash, queue: &str) -> Value {
        let (status, body) = d.get("/api/queues").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let row = body["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["queue"] == json!(queue));
        row.unwrap_or_else(|| panic!("no {queue} in {body}"))["workers"].clone()
    }

    async fn workers_and_schedulers_come_as_exact_json(backend: Backend) {
        let Some(d) = Dash::start(backend, "presence", DashOptions::default()).await else {
            return;
        };
        let (status, body) = d.get("/api/workers").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(workers_serving(&d, d.q.name()).await.is_empty());
        assert_eq!(workers_of_queue(&d, d.q.name()).await, json!(0));

        // A worker of both queues, running one task until released.
        let release = std::sync::Arc::new(tokio::sync::Notify::new());
        let held = release.clone();
        let worker = Worker::new(d.q.clone())
            .queues([(d.q.name().to_owned(), 2), (d.other.clone(), 1)])
            .concurrency(2)
            .poll_interval(Duration::from_millis(10))
            .heartbeat_interval(Duration::from_millis(20))
            .handle("slow", move |_task| {
                let held = held.clone();
                async move {
                    held.notified().await;
                    Ok::<(), BoxError>(())
                }
            });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(worker.run_until(async {
            stopped.await.ok();
        }));
        d.q.enqueue(Task::new("slow", &1).task_id("w1"))
            .await
            .unwrap();
        let mut seen = Vec::new();
        for _ in 0..2_000 {
            seen = workers_serving(&d, d.q.name()).await;
            if seen.len() == 1 && !seen[0]["active"].as_array().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(seen.len(), 1, "{seen:?}");
        let w = &seen[0];
        // Alone on both queues, it leads both (by name).
        let mut led = vec![d.q.name().to_owned(), d.other.clone()];
        led.sort();
        // The id and the host name are the machine's; every other field is exact (the queue's
        // clock stands at T0 + 60 s).
        assert_eq!(
            w,
            &json!({
                "id": w["id"],
                "host": w["host"],
                "pid": std::process::id(),
                "queues": [d.q.name(), d.other],
                "concurrency": 2,
                "started_at": at(60),
                "last_heartbeat_at": at(60),
                "active": [{"queue": d.q.name(), "id": "w1", "kind": "slow", "started_at": at(60)}],
                "leader_of": led,
            })
        );
        let prefix = format!("{}-{}-", w["host"].as_str().unwrap(), std::process::id());
        assert!(w["id"].as_str().unwrap().starts_with(&prefix), "{w}");
        assert_eq!(workers_of_queue(&d, d.q.name()).await, json!(1));
        assert_eq!(workers_of_queue(&d, &d.other).await, json!(1));

        // A scheduler's entry: the minute of T0 + 60 s (22:14:20) started at T0 + 40 s.
        let scheduler = retry_runtime::durable::Scheduler::new(d.q.clone())
            .every(Duration::from_secs(60), || Task::new("tick", &0));
        assert_eq!(scheduler.enqueue_due().await.unwrap(), 1);
        let (status, body) = d.get("/api/schedulers").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body.as_object().unwrap().len(), 1, "only `entries`: {body}");
        let mine: Vec<&Value> = body["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["queue"] == json!(d.q.name()))
            .collect();
        assert_eq!(mine.len(), 1, "{body}");
        assert_eq!(
            mine[0],
            &json!({
                "scheduler": mine[0]["scheduler"],
                "queue": d.q.name(),
                "kind": "tick",
                "spec": "every:60000ms",
                "next_run_at": at(100),
                "last_enqueued_at": at(60),
                "last_task_id": format!("periodic:tick:every:60000ms:{}000", T0_SECS + 40),
                "last_heartbeat_at": at(60),
            })
        );

        // A graceful stop: the worker is gone at once.
        release.notify_one();
        stop.send(()).unwrap();
        running.await.unwrap().unwrap();
        assert!(workers_serving(&d, d.q.name()).await.is_empty());
        assert_eq!(workers_of_queue(&d, d.q.name()).await, json!(0));
    }

    async fn presence_routes_answer_in_read_only_mode_and_unknown_ones_are_404(backend: Backend) {
        let options = DashOptions {
            read_only: true,
            ..DashOptions::default()
        };
        let Some(d) = Dash::start(backend, "presence-ro", options).await else {
            return;
        };
        let (status, body) = d.get("/api/workers").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body["workers"].is_array(), "{body}");
        let (status, body) = d.get("/api/schedulers").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body["entries"].is_array(), "{body}");
        // Reads only: a POST is refused by read-only mode before any route.
        for route in ["/api/workers", "/api/schedulers"] {
            let msg = assert_error(d.post(route).await, StatusCode::FORBIDDEN);
            assert!(msg.contains("read-only"), "{msg}");
        }
        for route in ["/api/workers/x", "/api/schedulers/x/run", "/api/worker"] {
            assert_error(d.get(route).await, StatusCode::NOT_FOUND);
        }
        let page = d
            .http
            .get(d.path("/assets/workers.js"))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(
            page.headers()["content-type"],
            "text/javascript; charset=utf-8"
        );
        assert!(
            page.text()
                .await
                .unwrap()
                .contains("function renderWorkers")
        );
    }
}

async fn a_host_with_a_port_of_letters_is_refused(backend: Backend) {
    let Some(d) = Dash::start(backend, "host-port", DashOptions::default()).await else {
        return;
    };
    let with_host = |host: &'static str| {
        let req = d.http.get(d.path("/api/queues")).header("host", host);
        async move { answer(req.send().await.unwrap()).await }
    };
    for refused in [
        "localhost:evil.com",
        "127.0.0.1:evil.com",
        "localhost:80:81",
        "localhost:99999",
        "localhost:",
        "[::1]evil.com",
        "[::1]:evil.com",
    ] {
        let msg = assert_error(with_host(refused).await, StatusCode::FORBIDDEN);
        assert!(msg.contains("Host"), "{refused}: {msg}");
    }
    for allowed in [
        "localhost:8080",
        "127.0.0.1:8080",
        "[::1]:8080",
        "localhost",
    ] {
        assert_eq!(with_host(allowed).await.0, StatusCode::OK, "{allowed}");
    }
}

async fn an_origin_of_the_other_scheme_is_refused(backend: Backend) {
    let Some(d) = Dash::start(backend, "origin-scheme", DashOptions::default()).await else {
        return;
    };
    let own = d.url.clone();
    let https = own.replace("http://", "https://");
    let post = |headers: Vec<(&'static str, String)>| {
        let mut req = d.http.post(d.path("/api/queues/{q}/pause"));
        for (name, value) in headers {
            req = req.header(name, value);
        }
        async move { answer(req.send().await.unwrap()).await }
    };
    for refused in [
        vec![("origin", https.clone())],
        vec![("referer", format!("{https}/#/"))],
        // Behind a TLS proxy, the page is https: an http origin is another one.
        vec![
            ("x-forwarded-proto", "https".to_owned()),
            ("origin", own.clone()),
        ],
    ] {
        let msg = assert_error(post(refused.clone()).await, StatusCode::FORBIDDEN);
        assert!(msg.contains("scheme"), "{refused:?}: {msg}");
    }
    assert!(!d.q.inspector().is_paused().await.unwrap());
    for allowed in [
        vec![("origin", own.clone())],
        vec![
            ("x-forwarded-proto", "https".to_owned()),
            ("origin", https.clone()),
        ],
        vec![
            ("x-forwarded-proto", "https".to_owned()),
            ("referer", format!("{https}/#/")),
        ],
    ] {
        assert_eq!(post(allowed.clone()).await.0, StatusCode::OK, "{allowed:?}");
    }
}

async fn a_guessing_address_is_locked_out_even_with_the_right_token(backend: Backend) {
    const TOKEN: &str = "the-right-token-0123456789";
    // Given with surrounding whitespace (as read from a file): trimmed.
    let options = DashOptions {
        token: Some(format!("  {TOKEN}\n")),
        ..DashOptions::default()
    };
    let Some(d) = Dash::start(backend, "throttle", options).await else {
        return;
    };
    // The guesser on 127.0.0.1 (d.http); an operator on 127.0.0.2, another address.
    let operator = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let with = |http: &reqwest::Client, token: &str, post: bool| {
        let req = match post {
            true => http.post(d.path("/api/queues/{q}/pause")),
            false => http.get(d.path("/api/queues")),
        };
        let req = req.bearer_auth(token);
        async move { req.send().await.unwrap() }
    };
    assert_eq!(with(&d.http, TOKEN, false).await.status(), StatusCode::OK);
    // 10 wrong tokens are answered 401; the 10th locks the address out (the first lock: 5 s).
    for i in 0..10 {
        let response = with(&d.http, &format!("guess-{i}-0123456789abc"), false).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "guess {i}");
    }
    let locked = |response: reqwest::Response| async move {
        let secs: u64 = response.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=5).contains(&secs), "Retry-After {secs}");
        let msg = assert_error(answer(response).await, StatusCode::TOO_MANY_REQUESTS);
        assert!(msg.contains("too many wrong tokens"), "{msg}");
    };
    locked(with(&d.http, "guess-10-0123456789abc", false).await).await;
    locked(with(&d.http, "guess-11-0123456789abc", true).await).await;
    // While the lock holds, the right token from that address is refused too: a guesser
    // learns nothing from its guesses (before, the right one got 200 after 2 000 wrong ones).
    locked(with(&d.http, TOKEN, false).await).await;
    locked(with(&d.http, TOKEN, true).await).await;
    assert!(!d.q.inspector().is_paused().await.unwrap());
    // No token at all from it: refused as well.
    locked(d.http.get(d.path("/api/queues")).send().await.unwrap()).await;
    // Another address is not locked out: the operators keep working while a guesser is.
    assert_eq!(
        answer(with(&operator, TOKEN, false).await).await.0,
        StatusCode::OK
    );
    assert_eq!(
        answer(with(&operator, TOKEN, true).await).await.0,
        StatusCode::OK
    );
    assert!(d.q.inspector().is_paused().await.unwrap());
    let wrong = with(&operator, "guess-0123456789abcdef", false).await;
    assert_error(answer(wrong).await, StatusCode::UNAUTHORIZED);
}

/// Reading the token from `--token-file` / `RETRY_QUEUE_TOKEN` (trimmed) is the command line's:
/// tests/cli.rs `dash_reads_its_token_from_a_file_or_the_environment_trimmed` and the unit tests
/// of `dashboard/token.rs`. Here: the served router takes a token, and refuses a short one.
#[tokio::test]
async fn a_token_is_served_and_a_short_one_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let q = Queue::connect(&url).await.unwrap();
    for token in ["served-token-0123456789", "another-token-0123456789"] {
        let options = DashOptions {
            token: Some(token.to_owned()),
            ..DashOptions::default()
        };
        let d = Dash::serve(q.clone(), "other".into(), None, options).await;
        let ok = d
            .http
            .get(d.path("/api/queues"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(answer(ok).await.0, StatusCode::OK);
    }
    // Shorter than 16 characters: refused before binding, with the minimum named.
    let short = Some("fifteen-chars-x".to_owned());
    let options = DashOptions {
        token: short,
        ..DashOptions::default()
    };
    let refused =
        tokio::time::timeout(Duration::from_secs(5), dashboard::serve(q.clone(), options))
            .await
            .expect("refused at once");
    let Err(e @ DashError::ShortToken { len: 15 }) = refused else {
        panic!("{refused:?}");
    };
    assert!(e.to_string().contains("at least 16"), "{e}");
    assert_eq!(dashboard::MIN_TOKEN_LEN, 16);
}

/// Percent-encodes every byte but the unreserved ones (as `encodeURIComponent` does, and `.`).
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A raw HTTP/1.1 request, its path sent exactly as given (an HTTP client library would
/// resolve `%2E` segments as a browser does): the status and JSON body.
async fn raw(addr: &str, method: &str, path: &str) -> (StatusCode, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8(response).unwrap();
    let status: u16 = text[9..12].parse().unwrap();
    let (_, body) = text.split_once("\r\n\r\n").unwrap();
    (
        StatusCode::from_u16(status).unwrap(),
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}")),
    )
}

async fn dot_ids_and_ids_with_reserved_characters_are_acted_on(backend: Backend) {
    let Some(d) = Dash::start(backend, "dot-ids", DashOptions::default()).await else {
        return;
    };
    let ids = [
        ".",
        "..",
        "a/b",
        "100%",
        "what?",
        "#1",
        "x y",
        "evil\u{202E}txt.exe",
    ];
    for id in ids {
        d.q.enqueue(Task::new("report", &1).task_id(id))
            .await
            .unwrap();
    }
    let state = |id: &'static str| {
        let q = d.q.clone();
        async move { q.inspector().get(id).await.unwrap().map(|t| t.state) }
    };
    let addr = d.url.trim_start_matches("http://").to_owned();
    let queue = d.q.name().to_owned();
    // In the path, percent-encoded: the server decodes `%2E` to `.` and finds the task.
    let (status, body) = raw(
        &addr,
        "POST",
        &format!("/api/queues/{queue}/tasks/%2E/archive"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"queue": queue, "id": ".", "action": "archive"})
    );
    assert_eq!(state(".").await, Some(TaskState::Archived));
    let (status, body) = raw(
        &addr,
        "POST",
        &format!("/api/queues/{queue}/tasks/%2E%2E/archive"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["id"], json!(".."));
    assert_eq!(state("..").await, Some(TaskState::Archived));
    let (status, _) = raw(
        &addr,
        "POST",
        &format!("/api/queues/{queue}/tasks/a%2Fb/archive"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(state("a/b").await, Some(TaskState::Archived));
    // A client that resolves dot segments (every browser, reqwest) sends `/tasks/run` for
    // `/tasks/%2E%2E/…`: hence the query form, which the page uses for every id.
    for id in ids {
        let (status, body) = answer(
            d.http
                .post(d.path(&format!("/api/queues/{{q}}/task/run?id={}", encode(id))))
                .send()
                .await
                .unwrap(),
        )
        .await;
        // The archived ones become pending; the pending ones stay so.
        let expected = json!({"queue": queue, "id": id, "action": "run"});
        assert_eq!((status, body), (StatusCode::OK, expected), "{id}");
        assert_eq!(state(id).await, Some(TaskState::Pending));
    }
    for id in ids {
        let (status, body) = answer(
            d.http
                .post(d.path(&format!("/api/queues/{{q}}/task/delete?id={}", encode(id))))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{id}: {body}");
        assert_eq!(body["id"], json!(id));
        assert_eq!(state(id).await, None, "{id} deleted");
    }
    // The query form: an unknown id is 404, no id 400, an unknown action 404.
    let post = |path: &str| d.http.post(d.path(path)).send();
    assert_error(
        answer(post("/api/queues/{q}/task/run?id=nobody").await.unwrap()).await,
        StatusCode::NOT_FOUND,
    );
    let msg = assert_error(
        answer(post("/api/queues/{q}/task/run").await.unwrap()).await,
        StatusCode::BAD_REQUEST,
    );
    assert!(msg.contains("missing field `id`"), "{msg}");
    assert_error(
        answer(post("/api/queues/{q}/task/explode?id=r1").await.unwrap()).await,
        StatusCode::BAD_REQUEST,
    );
}

/// Issue 23, items 4–6: finding tasks, one task, and an action on a batch of ids.
mod tasks_routes {
    use super::*;

    retry_tests::both_backends!(
        find_by_kind_and_search_is_exact_and_pages_by_cursor,
        kinds_lists_the_kinds_of_a_state,
        one_task_comes_with_payload_failures_and_actions,
        a_batch_acts_on_each_id_and_lists_the_refusals,
        a_bad_batch_is_400_json,
        read_only_and_cross_origin_refuse_the_batch,
    );
}

impl Dash {
    /// A POST with a JSON body and these extra headers.
    async fn post_json(
        &self,
        rest: &str,
        body: &str,
        headers: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        let mut req = self
            .http
            .post(self.path(rest))
            .header("content-type", "application/json")
            .body(body.to_owned());
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        answer(req.send().await.unwrap()).await
    }

    async fn batch(&self, body: Value) -> (StatusCode, Value) {
        self.post_json("/api/queues/{q}/tasks/batch", &body.to_string(), &[])
            .await
    }
}

/// The ids of a page's tasks.
fn page_ids(body: &Value) -> Vec<&str> {
    body["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("no tasks: {body}"))
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect()
}

async fn find_by_kind_and_search_is_exact_and_pages_by_cursor(backend: Backend) {
    let Some(d) = Dash::start(backend, "find", DashOptions::default()).await else {
        return;
    };
    // "GATEWAY" is in r1's and r2's payload and last error, whatever the case.
    let (status, first) = d
        .get_found("/api/queues/{q}/tasks?state=retry&search=GATEWAY&size=1")
        .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let next = first["next"].as_str().expect("a next cursor").to_owned();
    let mut expected = json!({
        "tasks": [first["tasks"][0].clone()],
        "next": next,
        "total": 3,
        "actions": {"task": ["run", "delete", "archive", "cancel"], "bulk": ["run-all", "delete-all"]},
        "kind": null,
        "search": "GATEWAY",
        "searched": 1,
        "search_limit_reached": false,
        "search_window": 10000,
    });
    assert_eq!(first, expected);
    assert_eq!(page_ids(&first), ["r1"]);
    let (_, second) = d
        .get_found(&format!(
            "/api/queues/{{q}}/tasks?state=retry&search=GATEWAY&size=1&after={next}"
        ))
        .await;
    assert_eq!(page_ids(&second), ["r2"]);
    // r2 and x1 read, nothing after: no next page.
    assert_eq!(
        (&second["searched"], &second["next"]),
        (&json!(2), &Value::Null)
    );
    // In the payload only (x1 carries the hostile text).
    let (_, script) = d
        .get_found("/api/queues/{q}/tasks?state=retry&search=%3Cscript%3E")
        .await;
    assert_eq!(page_ids(&script), ["x1"]);
    // By kind, within its state; with a search too.
    let (_, reports) = d
        .get_found("/api/queues/{q}/tasks?state=pending&kind=report")
        .await;
    assert_eq!(page_ids(&reports), ["p1"]);
    assert_eq!(
        (&reports["kind"], &reports["searched"], &reports["total"]),
        (&json!("report"), &Value::Null, &json!(1))
    );
    let (_, none) = d
        .get_found("/api/queues/{q}/tasks?state=pending&kind=charge")
        .await;
    assert_eq!(page_ids(&none), Vec::<&str>::new());
    let (_, both) = d
        .get_found("/api/queues/{q}/tasks?state=scheduled&kind=report&search=s1")
        .await;
    assert_eq!(page_ids(&both), ["s1"]);
    // An empty filter is no filter: the plain page.
    let (_, plain) = d
        .get("/api/queues/{q}/tasks?state=retry&kind=&search=")
        .await;
    assert_eq!(page_ids(&plain), ["r1", "r2", "x1"]);
    assert!(plain.get("searched").is_none(), "{plain}");
    // A filtered list pages by cursor only; a search text has a bound; a cursor is a cursor.
    let msg = assert_error(
        d.get("/api/queues/{q}/tasks?state=retry&kind=charge&page=2")
            .await,
        StatusCode::BAD_REQUEST,
    );
    assert!(msg.contains("by cursor"), "{msg}");
    let long = "x".repeat(300);
    let msg = assert_error(
        d.get(&format!(
            "/api/queues/{{q}}/tasks?state=retry&search={long}"
        ))
        .await,
        StatusCode::BAD_REQUEST,
    );
    assert!(msg.contains("at most 256 bytes"), "{msg}");
    assert_error(
        d.get("/api/queues/{q}/tasks?state=retry&search=a&after=nope")
            .await,
        StatusCode::BAD_REQUEST,
    );
    expected["search"] = json!("gateway");
    let (_, lower) = d
        .get("/api/queues/{q}/tasks?state=retry&search=gateway&size=1")
        .await;
    assert_eq!(lower["tasks"], expected["tasks"]);
}

async fn kinds_lists_the_kinds_of_a_state(backend: Backend) {
    let Some(d) = Dash::start(backend, "kinds", DashOptions::default()).await else {
        return;
    };
    let queue = d.q.name().to_owned();
    assert_eq!(
        d.get("/api/queues/{q}/kinds?state=retry").await,
        (
            StatusCode::OK,
            json!({"queue": queue, "state": "retry", "kinds": ["charge"]})
        )
    );
    d.q.enqueue(Task::new("audit", &0).task_id("p2"))
        .await
        .unwrap();
    let (_, pending) = d.get("/api/queues/{q}/kinds?state=pending").await;
    assert_eq!(pending["kinds"], json!(["audit", "report"]));
    let (_, active) = d.get("/api/queues/{q}/kinds?state=active").await;
    assert_eq!(active["kinds"], json!([]));
    assert_error(
        d.get("/api/queues/{q}/kinds").await,
        StatusCode::BAD_REQUEST,
    );
    assert_error(
        d.get("/api/queues/{q}/kinds?state=dead").await,
        StatusCode::BAD_REQUEST,
    );
}

async fn one_task_comes_with_payload_failures_and_actions(backend: Backend) {
    let Some(d) = Dash::start(backend, "one-task", DashOptions::default()).await else {
        return;
    };
    let queue = d.q.name().to_owned();
    assert_eq!(
        d.get("/api/queues/{q}/tasks/r1").await,
        (
            StatusCode::OK,
            json!({
                "id": "r1", "queue": queue, "kind": "charge", "state": "retry",
                "retried": 1, "max_retry": 25, "payload": "\"gateway down: 503\"",
                "enqueued_at": at(0), "next_process_at": at(22),
                "last_err": "gateway down: 503", "last_failed_at": at(0), "completed_at": null,
                "lease_expires_at": null,
                "errors": [{"retried": 0, "at": at(0), "error": "gateway down: 503"}],
                "actions": ["run", "delete", "archive", "cancel"],
                "now": at(60),
            })
        )
    );
    // A task carrying its enqueuer's trace context has it, and its trace id (r1 has neither).
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    d.q.enqueue(
        Task::new("report", &0)
            .task_id("traced")
            .trace_parent(traceparent),
    )
    .await
    .unwrap();
    let (_, traced) = d.get("/api/queues/{q}/tasks/traced").await;
    assert_eq!(
        (&traced["trace_parent"], &traced["trace_id"]),
        (
            &json!(traceparent),
            &json!("4bf92f3577b34da6a3ce929d0e0e4736")
        )
    );
    let (_, c1) = d.get("/api/queues/{q}/tasks/c1").await;
    assert_eq!(c1["actions"], json!(["run", "delete"]));
    assert_eq!(c1["completed_at"], json!(at(4)));
    let msg = assert_error(
        d.get("/api/queues/{q}/tasks/nope").await,
        StatusCode::NOT_FOUND,
    );
    assert!(msg.contains("nope"), "{msg}");
    // Ids that look like routes or hold a slash.
    for id in ["batch", "a/b"] {
        d.q.enqueue(Task::new("report", &0).task_id(id))
            .await
            .unwrap();
    }
    let (status, batch) = d.get("/api/queues/{q}/tasks/batch").await;
    assert_eq!((status, &batch["id"]), (StatusCode::OK, &json!("batch")));
    let (status, slash) = d.get("/api/queues/{q}/tasks/a%2Fb").await;
    assert_eq!((status, &slash["id"]), (StatusCode::OK, &json!("a/b")));
    // An active task carries its lease's end (the page flags it once it has passed).
    let claimed = protocol::claim(&d.q, 1, Duration::from_secs(30))
        .await
        .unwrap();
    let (_, active) = d
        .get(&format!("/api/queues/{{q}}/tasks/{}", claimed[0].id()))
        .await;
    assert_eq!(
        (&active["state"], &active["lease_expires_at"]),
        (&json!("active"), &json!(at(90)))
    );
    assert_eq!(active["actions"], json!(["cancel"]));
}

async fn a_batch_acts_on_each_id_and_lists_the_refusals(backend: Backend) {
    let Some(d) = Dash::start(backend, "batch", DashOptions::default()).await else {
        return;
    };
    let queue = d.q.name().to_owned();
    // p1 is the soonest due: it becomes active.
    let claimed = protocol::claim(&d.q, 1, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(claimed[0].id(), "p1");
    assert_eq!(
        d.batch(json!({"action": "run", "ids": ["a1", "r1", "nope", "p1"]}))
            .await,
        (
            StatusCode::OK,
            json!({
                "queue": queue, "action": "run", "done": 2,
                "failed": [
                    {"id": "nope", "error": "no such task"},
                    {"id": "p1", "error": "active: a worker holds its lease; wait for the attempt to end"},
                ],
            })
        )
    );
    let state = |id: &'static str| {
        let q = d.q.clone();
        async move { q.inspector().get(id).await.unwrap().unwrap().state }
    };
    assert_eq!(state("a1").await, TaskState::Pending);
    assert_eq!(state("r1").await, TaskState::Pending);
    let (_, archived) = d
        .batch(json!({"action": "archive", "ids": ["r2", "s1", "c1"]}))
        .await;
    assert_eq!(archived["done"], json!(2));
    assert_eq!(archived["failed"][0]["id"], json!("c1"));
    let why = archived["failed"][0]["error"].as_str().unwrap();
    assert!(why.contains("completed"), "{why}");
    assert_eq!(state("r2").await, TaskState::Archived);
    assert_eq!(state("s1").await, TaskState::Archived);
    let (_, deleted) = d
        .batch(json!({"action": "delete", "ids": ["r2", "c1", "p1"]}))
        .await;
    assert_eq!(
        (&deleted["done"], deleted["failed"][0]["id"].as_str()),
        (&json!(2), Some("p1"))
    );
    assert!(d.q.inspector().get("c1").await.unwrap().is_none());
    // Cancel takes an active task (its worker stops it) and a waiting one.
    let (_, canceled) = d
        .batch(json!({"action": "cancel", "ids": ["p1", "x1"]}))
        .await;
    assert_eq!(
        (&canceled["done"], &canceled["failed"]),
        (&json!(2), &json!([]))
    );
    assert_eq!(state("x1").await, TaskState::Archived);
    assert_eq!(
        state("p1").await,
        TaskState::Active,
        "until its worker stops it"
    );
}

async fn a_bad_batch_is_400_json(backend: Backend) {
    let Some(d) = Dash::start(backend, "batch-bad", DashOptions::default()).await else {
        return;
    };
    let many: Vec<String> = (0..1001).map(|n| format!("t{n}")).collect();
    for (body, says) in [
        (
            json!({"action": "explode", "ids": ["r1"]}),
            "unknown variant `explode`",
        ),
        (json!({"ids": ["r1"]}), "missing field `action`"),
        (json!({"action": "run"}), "missing field `ids`"),
        (json!({"action": "run", "ids": []}), "1 to 1000 ids, got 0"),
        (
            json!({"action": "run", "ids": many}),
            "1 to 1000 ids, got 1001",
        ),
        (json!({"action": "run", "ids": [1, 2]}), "expected a string"),
    ] {
        let msg = assert_error(d.batch(body.clone()).await, StatusCode::BAD_REQUEST);
        assert!(msg.contains(says), "{body}: {msg}");
    }
    let msg = assert_error(
        d.post_json("/api/queues/{q}/tasks/batch", "run r1", &[])
            .await,
        StatusCode::BAD_REQUEST,
    );
    assert!(msg.contains("must be JSON"), "{msg}");
    assert_eq!(
        d.q.inspector().get("r1").await.unwrap().unwrap().state,
        TaskState::Retry,
        "nothing was run"
    );
}

async fn read_only_and_cross_origin_refuse_the_batch(backend: Backend) {
    let body = json!({"action": "delete", "ids": ["r1"]}).to_string();
    let options = DashOptions {
        read_only: true,
        ..DashOptions::default()
    };
    let Some(ro) = Dash::start(backend, "batch-read-only", options).await else {
        return;
    };
    let msg = assert_error(
        ro.post_json("/api/queues/{q}/tasks/batch", &body, &[])
            .await,
        StatusCode::FORBIDDEN,
    );
    assert!(msg.contains("read-only"), "{msg}");
    // Reading still works in read-only mode.
    assert_eq!(ro.get("/api/queues/{q}/tasks/r1").await.0, StatusCode::OK);
    assert_eq!(
        ro.get("/api/queues/{q}/kinds?state=retry").await.0,
        StatusCode::OK
    );
    let Some(d) = Dash::start(backend, "batch-origin", DashOptions::default()).await else {
        return;
    };
    for header in [
        ("origin", "http://evil.test"),
        ("sec-fetch-site", "cross-site"),
    ] {
        let msg = assert_error(
            d.post_json("/api/queues/{q}/tasks/batch", &body, &[header])
                .await,
            StatusCode::FORBIDDEN,
        );
        assert!(msg.contains("cross-origin"), "{msg}");
    }
    assert!(
        d.q.inspector().get("r1").await.unwrap().is_some(),
        "not deleted"
    );
    let own = d.url.clone();
    let (status, done) = d
        .post_json("/api/queues/{q}/tasks/batch", &body, &[("origin", &own)])
        .await;
    assert_eq!((status, &done["done"]), (StatusCode::OK, &json!(1)));
}

/// The requests the OpenAPI document allows are answered (issue 41, item 6: five of them were
/// refused with 400): `state` with `states` (their union), `hours` with `days` (by day),
/// `page` with an empty `after` (no cursor); the states a bulk action refuses are not in its
/// parameter's enum. A search with NUL (SQLite's LIKE stops there: it matched everything) is
/// refused, and the document's pattern says so.
async fn requests_the_document_allows_are_answered_and_those_it_forbids_are_refused(
    backend: Backend,
) {
    let Some(d) = Dash::start(backend, "document", DashOptions::default()).await else {
        return;
    };
    let ok = |got: (StatusCode, Value)| {
        assert_eq!(got.0, StatusCode::OK, "{}", got.1);
        got.1
    };
    let union = ok(d
        .get("/api/queues/{q}/errors?state=archived&states=retry")
        .await);
    let listed = ok(d.get("/api/queues/{q}/errors?states=archived,retry").await);
    assert_eq!(union["states"], listed["states"]);
    let same = ok(d
        .get("/api/queues/{q}/errors?state=retry&states=retry")
        .await);
    let retry = ok(d.get("/api/queues/{q}/errors?states=retry").await);
    assert_eq!(same["states"], retry["states"]);
    let both = ok(d.get("/api/queues/{q}/history?hours=24&days=2").await);
    assert_eq!(both, ok(d.get("/api/queues/{q}/history?days=2").await));
    let empty_after = ok(d
        .get("/api/queues/{q}/tasks?state=retry&page=1&after=")
        .await);
    let page_one = ok(d.get("/api/queues/{q}/tasks?state=retry&page=1").await);
    assert_eq!(empty_after["tasks"], page_one["tasks"]);
    assert_eq!(empty_after["tasks"].as_array().unwrap().len(), 3);
    // NUL: refused, not a search that matches every task.
    let nul = d.get("/api/queues/{q}/tasks?state=retry&search=%00").await;
    let why = assert_error(nul, StatusCode::BAD_REQUEST);
    assert!(why.contains("NUL"), "{why}");
    let nul = d
        .get("/api/queues/{q}/tasks?state=retry&search=gateway%00zzz")
        .await;
    assert_error(nul, StatusCode::BAD_REQUEST);

    let (_, doc) = d.get("/api/openapi.json").await;
    let state_enum = |path: &str| {
        let params = doc["paths"][path]["post"]["parameters"].as_array().unwrap();
        let state = params.iter().find(|p| p["name"] == "state").unwrap();
        let schema = &state["schema"];
        let schema = match schema.get("$ref") {
            Some(r) => {
                let name = r.as_str().unwrap().rsplit('/').next().unwrap();
                &doc["components"]["schemas"][name]
            }
            None => schema,
        };
        schema["enum"].clone()
    };
    assert_eq!(
        state_enum("/api/queues/{queue}/run-all"),
        json!(["scheduled", "retry", "archived", "completed"])
    );
    assert_eq!(
        state_enum("/api/queues/{queue}/delete-all"),
        json!(["pending", "scheduled", "retry", "archived", "completed"])
    );
    let tasks = doc["paths"]["/api/queues/{queue}/tasks"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let search = tasks.iter().find(|p| p["name"] == "search").unwrap();
    assert_eq!(search["schema"]["pattern"], json!("^[^\\u0000]*$"));
    // What the server refuses, the document leaves out: a bulk action on a state it refuses.
    assert_error(
        d.post("/api/queues/{q}/delete-all?state=active").await,
        StatusCode::BAD_REQUEST,
    );
    assert_error(
        d.post("/api/queues/{q}/run-all?state=pending").await,
        StatusCode::BAD_REQUEST,
    );
}

/// The Active tab's count of running tasks and its rows' marks come from one source (issue 41,
/// item 6): a worker's heartbeat naming tasks that finished since (it is up to an interval
/// old) made the tab say "3 running" over rows of which one ran. A worker's row is written as
/// a worker writes it, naming `a1` (active) and two tasks that are no longer.
#[tokio::test]
async fn the_active_tabs_running_count_is_the_rows_that_run() {
    let Some(d) = Dash::start(Backend::Sqlite, "ghost", DashOptions::default()).await else {
        return;
    };
    let q = d.q.clone().named(format!("{}-ghost", d.q.name()));
    for id in ["a1", "a2", "a3"] {
        q.enqueue(Task::new("slow", &0).task_id(id)).await.unwrap();
    }
    let claimed = protocol::claim(&q, 3, Duration::from_secs(86_400))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
    let path = d._dir.as_ref().unwrap().path().join("tasks.db");
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let now_ms = i64::try_from(T0_SECS * 1000 + 60_000).unwrap();
    let held =
        |id: &str| json!({"queue": q.name(), "id": id, "kind": "slow", "started_ms": now_ms});
    sqlx::query(
        "INSERT INTO retry_workers (id, host, pid, queues, concurrency, started_ms, heartbeat_ms, \
         stale_ms, active) VALUES ('ghost', 'host', 1, $1, 3, $2, $2, $3, $4)",
    )
    .bind(json!([q.name()]).to_string())
    .bind(now_ms)
    .bind(now_ms + 3_600_000)
    .bind(json!([held("done-1"), held("done-2"), held("a1")]).to_string())
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let (status, page) = d
        .get(&format!("/api/queues/{}/tasks?state=active", q.name()))
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["stats"]["counts"]["active"], json!(3), "{page}");
    assert_eq!(page["running"], json!(["a1"]), "{page}");
    assert_eq!(page["stats"]["running"], json!(1), "{page}");
    // The overview counts the same way.
    let (_, overview) = d.get("/api/queues").await;
    let row = overview["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["queue"] == json!(q.name()))
        .cloned()
        .unwrap();
    assert_eq!(row["running"], json!(1), "{row}");
}
