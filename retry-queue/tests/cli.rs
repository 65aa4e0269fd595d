//! The `retry-queue` binary, run as an operator runs it: every subcommand against a queue
//! seeded through `retry_runtime::durable`, on SQLite (a temporary file, the queue `default`)
//! and on PostgreSQL (`RETRY_TEST_POSTGRES_URL`, or a throwaway server on a machine with
//! PostgreSQL; a queue name per test; skipped loudly without either). Tables, lines, JSON and
//! exit codes are asserted exactly.

use retry_tests::durable_env::{Backend, pgbouncer_url_or_skip, postgres_url_or_skip};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use retry_runtime::BoxError;
use retry_runtime::durable::{DelayRng, ManualClock, Queue, Task, TaskState, Worker, protocol};
use serde_json::{Value, json};

/// 2023-11-14T22:13:20Z: where the seeding clock of most tests starts.
const T0: u64 = 1_700_000_000;

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(T0 + secs)
}

/// A database with one seeded queue, and the clock the seeding read.
struct Fixture {
    url: String,
    q: Queue,
    clock: ManualClock,
    _dir: Option<tempfile::TempDir>,
}

impl Fixture {
    /// An empty queue on `backend`: `default` of a new SQLite file, or a queue of its own on
    /// PostgreSQL; `None` (said on stderr) when PostgreSQL is not configured.
    async fn new(backend: Backend, test: &str) -> Option<Fixture> {
        let clock = ManualClock::new(at(0));
        let (url, q, dir) = match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("a temporary directory");
                let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
                let q = Queue::connect(&url).await.expect("SQLite opens a new file");
                (url, q, Some(dir))
            }
            Backend::Postgres | Backend::PgBouncer => {
                // Through PgBouncer (transaction pooling), the CLI detects the pooler.
                let url = match backend {
                    Backend::PgBouncer => pgbouncer_url_or_skip(&format!("cli::{test}"))?,
                    _ => postgres_url_or_skip(&format!("cli::{test}"))?,
                };
                let q = Queue::connect(&url)
                    .await
                    .expect("the test PostgreSQL answers");
                let name = format!("cli-{test}-{}-{:08x}", std::process::id(), rand_suffix());
                (url, q.named(name), None)
            }
        };
        Some(Fixture {
            url,
            q: q.with_clock(clock.clone()),
            clock,
            _dir: dir,
        })
    }

    fn name(&self) -> &str {
        self.q.name()
    }

    /// A fixture seeded with [`seed`].
    async fn seeded(backend: Backend, test: &str) -> Option<Fixture> {
        let fx = Fixture::new(backend, test).await?;
        seed(&fx).await;
        Some(fx)
    }

    /// Runs `retry-queue --db URL ARGS…`, with `--queue NAME` appended unless the queue is
    /// `default` (the CLI's default, which the SQLite runs rely on).
    fn run(&self, args: &[&str]) -> Run {
        let mut args: Vec<&str> = args.to_vec();
        if self.name() != "default" {
            args.extend(["--queue", self.name()]);
        }
        self.run_exact(&args)
    }

    /// Runs `retry-queue --db URL ARGS…` as given.
    fn run_exact(&self, args: &[&str]) -> Run {
        run(bin().arg("--db").arg(&self.url).args(args))
    }
}

/// A few random bits from the time and the address of a local: no RNG crate needed.
fn rand_suffix() -> u32 {
    let local = 0u8;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    nanos ^ (std::ptr::addr_of!(local) as usize as u32)
}

/// What a run printed, and its exit code.
#[derive(Debug)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Exit code 0, nothing on stderr; the stdout.
    fn ok(&self) -> &str {
        assert_eq!(
            (self.code, self.stderr.as_str()),
            (Some(0), ""),
            "stdout: {}",
            self.stdout
        );
        &self.stdout
    }

    /// The stdout of a successful run, as JSON.
    fn json(&self) -> Value {
        serde_json::from_str(self.ok()).expect("the output is JSON")
    }

    /// Exit code 1, nothing on stdout, exactly `line` (and a newline) on stderr.
    fn fails_with(&self, line: &str) {
        assert_eq!(
            (self.code, self.stdout.as_str(), self.stderr.as_str()),
            (Some(1), "", format!("{line}\n").as_str())
        );
    }
}

/// The binary, without `RETRY_QUEUE_DB` from the test's environment, with backtraces on (so a
/// panic would show in stderr and fail the exact comparisons).
fn bin() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_retry-queue"));
    command
        .env_remove("RETRY_QUEUE_DB")
        .env_remove("RETRY_QUEUE_TOKEN")
        .env("RUST_BACKTRACE", "1");
    command
}

fn run(command: &mut Command) -> Run {
    run_output(command.output().expect("the binary runs"))
}

fn run_output(output: Output) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = output;
    Run {
        code: status.code(),
        stdout: String::from_utf8(stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(stderr).expect("UTF-8 stderr"),
    }
}

/// Kind `charge`: completes when its payload is `"ok"`, fails with its payload as the error
/// otherwise (retried after 15 + 7 = 22 s the first time).
fn worker(q: &Queue) -> Worker {
    Worker::new(q.clone())
        .concurrency(8)
        .rng(DelayRng::fixed(7))
        .handle("charge", |task| async move {
            let msg: String = task.payload()?;
            if msg == "ok" {
                Ok(())
            } else {
                Err(BoxError::from(msg))
            }
        })
}

/// The queue every test but `stats` reads, at `at(…)` seconds:
/// - `busy` (kind `report`): active, claimed at 0;
/// - `r1`, `r2` (`gateway down`, failed at 0 and 1), `r3` (`timeout`, at 2): retry, due at
///   22, 23, 24;
/// - `a1` (`card declined`, `max_retry` 0): archived at 3;
/// - `c1`: completed at 4;
/// - `p1` (payload `{"order":7}`): pending since 5; `s1`: scheduled at 3605.
async fn seed(fx: &Fixture) {
    let (q, clock) = (&fx.q, &fx.clock);
    let w = worker(q);
    q.enqueue(Task::new("report", &0).task_id("busy"))
        .await
        .unwrap();
    assert_eq!(
        protocol::claim(q, 1, Duration::from_secs(86_400))
            .await
            .unwrap()
            .len(),
        1
    );
    for (secs, id, msg) in [
        (0, "r1", "gateway down"),
        (1, "r2", "gateway down"),
        (2, "r3", "timeout"),
    ] {
        clock.set(at(secs));
        q.enqueue(Task::new("charge", &msg).task_id(id))
            .await
            .unwrap();
        assert_eq!(w.run_due().await.unwrap(), 1);
    }
    clock.set(at(3));
    q.enqueue(
        Task::new("charge", &"card declined")
            .task_id("a1")
            .max_retry(0),
    )
    .await
    .unwrap();
    assert_eq!(w.run_due().await.unwrap(), 1);
    clock.set(at(4));
    q.enqueue(Task::new("charge", &"ok").task_id("c1"))
        .await
        .unwrap();
    assert_eq!(w.run_due().await.unwrap(), 1);
    clock.set(at(5));
    q.enqueue(Task::new("report", &json!({"order": 7})).task_id("p1"))
        .await
        .unwrap();
    q.enqueue(
        Task::new("report", &0)
            .task_id("s1")
            .process_in(Duration::from_secs(3600)),
    )
    .await
    .unwrap();
}

retry_tests::both_backends!(
    task_ls_prints_one_page_in_state_order,
    task_show_prints_every_field_and_refuses_unknown_ids,
    task_run_delete_archive_act_on_one_task_or_say_why_not,
    task_cancel_archives_a_waiting_task_or_stops_an_active_one,
    run_all_and_delete_all_act_on_a_state_and_refuse_active,
    queue_pause_and_unpause,
    errors_groups_tasks_by_last_err,
    stats_shows_every_queue,
    history_prints_attempts_per_hour_or_day,
    a_bad_queue_name_is_one_clear_line,
);

async fn task_ls_prints_one_page_in_state_order(backend: Backend) {
    let Some(fx) = Fixture::seeded(backend, "ls").await else {
        return;
    };
    let name = fx.name();
    // Without --state, `task ls` lists the retry tasks, as `errors` groups them.
    assert_eq!(
        fx.run(&["task", "ls"]).ok(),
        fx.run(&["task", "ls", "--state", "retry"]).ok()
    );
    assert_eq!(
        fx.run(&["task", "ls", "--state", "retry"]).ok(),
        format!(
            "\
ID  KIND    RETRIED  NEXT PROCESS AT       LAST FAILED AT        LAST ERR
r1  charge     1/25  2023-11-14T22:13:42Z  2023-11-14T22:13:20Z  gateway down
r2  charge     1/25  2023-11-14T22:13:43Z  2023-11-14T22:13:21Z  gateway down
r3  charge     1/25  2023-11-14T22:13:44Z  2023-11-14T22:13:22Z  timeout
page 1 of 1: 3 of 3 retry tasks in queue \"{name}\"
"
        )
    );
    assert_eq!(
        fx.run(&[
            "task", "ls", "--state", "retry", "--page", "2", "--size", "2"
        ])
        .ok(),
        format!(
            "\
ID  KIND    RETRIED  NEXT PROCESS AT       LAST FAILED AT        LAST ERR
r3  charge     1/25  2023-11-14T22:13:44Z  2023-11-14T22:13:22Z  timeout
page 2 of 2: 1 of 3 retry tasks in queue \"{name}\"
"
        )
    );
    // Past the end: an empty page, still a success.
    assert_eq!(
        fx.run(&["task", "ls", "--state", "retry", "--page", "9"])
            .ok(),
        format!(
            "\
ID  KIND  RETRIED  NEXT PROCESS AT  LAST FAILED AT  LAST ERR
page 9 of 1: 0 of 3 retry tasks in queue \"{name}\"
"
        )
    );
    assert_eq!(
        fx.run(&["task", "ls", "--state", "archived"]).ok(),
        format!(
            "\
ID  KIND    RETRIED  NEXT PROCESS AT  LAST FAILED AT        LAST ERR
a1  charge      0/0  -                2023-11-14T22:13:23Z  card declined (retries exhausted: 0 of 0)
page 1 of 1: 1 of 1 archived tasks in queue \"{name}\"
"
        )
    );
    assert_eq!(
        fx.run(&["task", "ls", "--state", "active"]).ok(),
        format!(
            "\
ID    KIND    RETRIED  NEXT PROCESS AT  LAST FAILED AT  LAST ERR
busy  report     0/25  -                -               -
page 1 of 1: 1 of 1 active tasks in queue \"{name}\"
"
        )
    );

    let page = fx
        .run(&["task", "ls", "--state", "retry", "--size", "1", "--json"])
        .json();
    // The cursor of the next page is opaque (it holds the row's sequence number, which differs
    // by backend); the pages it leads to are checked below.
    let next = page["next"].as_str().expect("a next cursor").to_owned();
    assert_eq!(
        page,
        json!({
            "next": next,
            "tasks": [{
                "id": "r1", "queue": name, "kind": "charge", "state": "retry",
                "retried": 1, "max_retry": 25, "payload": "\"gateway down\"",
                "enqueued_at": "2023-11-14T22:13:20Z",
                "next_process_at": "2023-11-14T22:13:42Z",
                "last_err": "gateway down",
                "last_failed_at": "2023-11-14T22:13:20Z",
                "completed_at": null,
                "lease_expires_at": null,
                "errors": [{"retried": 0, "at": "2023-11-14T22:13:20Z", "error": "gateway down"}],
            }],
            "total": 3,
            "actions": {"task": ["run", "delete", "archive", "cancel"], "bulk": ["run-all", "delete-all"]},
        })
    );
    // Page by cursor: `--after` the page's `next`, the text naming the cursor after it.
    let second = fx.run(&[
        "task", "ls", "--state", "retry", "--size", "1", "--after", &next,
    ]);
    let second = second.ok();
    let (table, next2) = second
        .split_once("next page: --after ")
        .expect("a next page");
    assert_eq!(
        table,
        format!(
            "\
ID  KIND    RETRIED  NEXT PROCESS AT       LAST FAILED AT        LAST ERR
r2  charge     1/25  2023-11-14T22:13:43Z  2023-11-14T22:13:21Z  gateway down
1 of 3 retry tasks in queue \"{name}\"
"
        )
    );
    let next2 = next2.trim_end();
    assert_ne!(next2, next);
    assert_eq!(
        fx.run(&[
            "task", "ls", "--state", "retry", "--size", "1", "--after", next2
        ])
        .ok(),
        format!(
            "\
ID  KIND    RETRIED  NEXT PROCESS AT       LAST FAILED AT        LAST ERR
r3  charge     1/25  2023-11-14T22:13:44Z  2023-11-14T22:13:22Z  timeout
1 of 3 retry tasks in queue \"{name}\"
"
        )
    );
    let both = fx.run(&[
        "task", "ls", "--state", "retry", "--page", "2", "--after", &next,
    ]);
    assert_eq!((both.code, both.stdout.as_str()), (Some(2), ""));
    let bad = fx.run(&["task", "ls", "--state", "retry", "--after", "page-2"]);
    assert_ne!(bad.code, Some(0));
    assert!(
        bad.stderr.contains("is not a page cursor"),
        "{}",
        bad.stderr
    );

    // Clap rejects a bad state, page or size (exit code 2) before anything runs.
    let bad = fx.run(&["task", "ls", "--state", "failed"]);
    assert_eq!((bad.code, bad.stdout.as_str()), (Some(2), ""));
    assert!(
        bad.stderr
            .starts_with("error: invalid value 'failed' for '--state <STATE>'\n  [possible values: pending, scheduled, active, retry, archived, completed]\n"),
        "{}",
        bad.stderr
    );
    for flag in ["--page", "--size"] {
        let bad = fx.run(&["task", "ls", "--state", "retry", flag, "0"]);
        assert_eq!((bad.code, bad.stdout.as_str()), (Some(2), ""));
        assert!(
            bad.stderr.starts_with(&format!(
                "error: invalid value '0' for '{flag} <{}>': 0 is not in 1..=4294967295\n",
                &flag[2..].to_uppercase()
            )),
            "{}",
            bad.stderr
        );
    }
}

async fn task_show_prints_every_field_and_refuses_unknown_ids(backend: Backend) {
    let Some(fx) = Fixture::seeded(backend, "show").await else {
        return;
    };
    let name = fx.name();
    assert_eq!(
        fx.run(&["task", "show", "r2"]).ok(),
        format!(
            "\
id:              r2
queue:           {name}
kind:            charge
system:          -
state:           retry
archive_reason:  -
retried:         1/25
enqueued_at:     2023-11-14T22:13:21Z
next_process_at: 2023-11-14T22:13:43Z
last_failed_at:  2023-11-14T22:13:21Z
completed_at:    -
lease_expires_at: -
last_err:        gateway down
payload:         \"gateway down\"
trace:           -
errors:
  #0   2023-11-14T22:13:21Z  gateway down
"
        )
    );
    // A task that carries its enqueuer's trace context: `trace:` is the trace id; the JSON
    // has the traceparent too (absent above, where there is none).
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    fx.q.enqueue(
        Task::new("charge", &1)
            .task_id("t1")
            .trace_parent(traceparent),
    )
    .await
    .unwrap();
    let shown = fx.run(&["task", "show", "t1"]);
    let shown = shown.ok();
    assert!(
        shown.contains("\ntrace:           4bf92f3577b34da6a3ce929d0e0e4736\n"),
        "{shown}"
    );
    let json = fx.run(&["task", "show", "t1", "--json"]).json();
    assert_eq!(
        (&json["trace_parent"], &json["trace_id"]),
        (
            &json!(traceparent),
            &json!("4bf92f3577b34da6a3ce929d0e0e4736")
        )
    );
    // Archived: the reason is shown, in words and in the JSON (absent for other states).
    fx.q.inspector().archive_task("t1").await.unwrap();
    let archived = fx.run(&["task", "show", "t1"]);
    let shown = archived.ok();
    assert!(shown.contains("\narchive_reason:  operator\n"), "{shown}");
    let json = fx.run(&["task", "show", "t1", "--json"]).json();
    assert_eq!(json["archive_reason"], json!("operator"));
    assert_eq!(
        fx.run(&["task", "show", "c1", "--json"]).json(),
        json!({
            "id": "c1", "queue": name, "kind": "charge", "state": "completed",
            "retried": 0, "max_retry": 25, "payload": "\"ok\"",
            "enqueued_at": "2023-11-14T22:13:24Z",
            "next_process_at": null, "last_err": null, "last_failed_at": null,
            "completed_at": "2023-11-14T22:13:24Z", "lease_expires_at": null, "errors": [],
        })
    );
    assert_eq!(
        fx.run(&["task", "show", "p1", "--json"]).json()["payload"],
        r#"{"order":7}"#
    );
    fx.run(&["task", "show", "abc"])
        .fails_with(&format!("error: no task \"abc\" in queue \"{name}\""));
    fx.run(&["task", "show", "abc", "--json"])
        .fails_with(&format!("error: no task \"abc\" in queue \"{name}\""));
}

async fn task_run_delete_archive_act_on_one_task_or_say_why_not(backend: Backend) {
    let Some(fx) = Fixture::seeded(backend, "act").await else {
        return;
    };
    let name = fx.name();
    assert_eq!(
        fx.run(&["task", "run", "a1"]).ok(),
        format!("task \"a1\" in queue \"{name}\": runs as soon as a worker is free\n")
    );
    let a1 = fx.q.inspector().get("a1").await.unwrap().unwrap();
    assert_eq!(a1.state, TaskState::Pending);
    assert_eq!(
        fx.run(&["task", "delete", "c1"]).ok(),
        format!("task \"c1\" in queue \"{name}\": deleted\n")
    );
    assert!(fx.q.inspector().get("c1").await.unwrap().is_none());
    assert_eq!(
        fx.run(&["task", "archive", "r1", "--json"]).json(),
        json!({"queue": name, "id": "r1", "action": "archive"})
    );
    assert_eq!(
        fx.q.inspector().get("r1").await.unwrap().unwrap().state,
        TaskState::Archived
    );
    assert_eq!(
        fx.run(&["task", "archive", "p1"]).ok(),
        format!("task \"p1\" in queue \"{name}\": archived\n")
    );

    let active = format!(
        "error: task \"busy\" in queue \"{name}\" is active (a worker holds its lease): wait for \
         the attempt to end"
    );
    for action in ["run", "delete", "archive"] {
        fx.run(&["task", action, "busy"]).fails_with(&active);
        fx.run(&["task", action, "nope"])
            .fails_with(&format!("error: no task \"nope\" in queue \"{name}\""));
    }
    assert_eq!(
        fx.q.inspector().get("busy").await.unwrap().unwrap().state,
        TaskState::Active
    );
    // A completed task cannot be archived.
    fx.q.enqueue(Task::new("charge", &"ok").task_id("c2"))
        .await
        .unwrap();
    worker(&fx.q).run_due().await.unwrap();
    fx.run(&["task", "archive", "c2"]).fails_with(
        "error: task \"c2\" completed: only a pending, scheduled or retry task can be archived",
    );
    // Control characters in an id are shown escaped, never sent to the terminal.
    fx.run(&["task", "show", "x\u{1b}[2Jy"])
        .fails_with(&format!(
            "error: no task \"x\\u{{1b}}[2Jy\" in queue \"{name}\""
        ));
}

async fn task_cancel_archives_a_waiting_task_or_stops_an_active_one(backend: Backend) {
    let Some(fx) = Fixture::seeded(backend, "cancel").await else {
        return;
    };
    let name = fx.name();
    assert_eq!(
        fx.run(&["task", "cancel", "r2"]).ok(),
        format!(
            "task \"r2\" in queue \"{name}\": canceled: archived (a running task: its worker \
             stops it within a second, then archives it)\n"
        )
    );
    let r2 = fx.q.inspector().get("r2").await.unwrap().unwrap();
    assert_eq!(r2.state, TaskState::Archived);
    assert_eq!(
        r2.last_err.as_deref(),
        Some("gateway down (canceled by operator)")
    );
    assert_eq!(
        fx.run(&["task", "cancel", "busy", "--json"]).json(),
        json!({"queue": name, "id": "busy", "action": "cancel"})
    );
    fx.run(&["task", "cancel", "c1"]).fails_with(
        "error: task \"c1\" is completed: only a pending, scheduled, retry or active task can be \
         canceled",
    );
    fx.run(&["task", "cancel", "nope"])
        .fails_with(&format!("error: no task \"nope\" in queue \"{name}\""));
}

async fn run_all_and_delete_all_act_on_a_state_and_refuse_active(backend: Backend) {
    let Some(fx) = Fixture::seeded(backend, "bulk").await else {
        return;
    };
    let name = fx.name();
    assert_eq!(
        fx.run(&["task", "run-all", "--state", "archived"]).ok(),
        format!(
            "1 archived tasks of queue \"{name}\" now pending, to run as soon as a worker is free\n"
        )
    );
    assert_eq!(fx.q.inspector().count(TaskState::Pending).await.unwrap(), 2);
    assert_eq!(
        fx.run(&["task", "delete-all", "--state", "retry"]).ok(),
        format!("3 retry tasks of queue \"{name}\" deleted\n")
    );
    assert_eq!(fx.q.inspector().count(TaskState::Retry).await.unwrap(), 0);
    assert_eq!(
        fx.run(&["task", "run-all", "--state", "scheduled", "--json"])
            .json(),
        json!({"queue": name, "state": "scheduled", "count": 1})
    );
    assert_eq!(
        fx.run(&["task", "delete-all", "--state", "archived", "--json"])
            .json(),
        json!({"queue": name, "state": "archived", "count": 0})
    );

    fx.run(&["task", "run-all", "--state", "active"])
        .fails_with(
            "error: cannot run all active tasks: only scheduled, retry, archived and completed \
         tasks can be run",
        );
    fx.run(&["task", "run-all", "--state", "pending"])
        .fails_with(
            "error: cannot run all pending tasks: only scheduled, retry, archived and completed \
         tasks can be run",
        );
    fx.run(&["task", "delete-all", "--state", "active"])
        .fails_with(
            "error: cannot delete all active tasks: workers hold them; wait for their attempts to \
         end",
        );
    assert_eq!(fx.q.inspector().count(TaskState::Active).await.unwrap(), 1);
    let bad = fx.run(&["task", "delete-all", "--state", "dead"]);
    assert_eq!((bad.code, bad.stdout.as_str()), (Some(2), ""));
    assert!(
        bad.stderr
            .starts_with("error: invalid value 'dead' for '--state <STATE>'"),
        "{}",
        bad.stderr
    );
    assert_eq!(
        fx.q.inspector().count(TaskState::Pending).await.unwrap(),
        3,
        "untouched"
    );
}

async fn queue_pause_and_unpause(backend: Backend) {
    let Some(fx) = Fixture::seeded(backend, "pause").await else {
        return;
    };
    let name = fx.name();
    assert_eq!(
        fx.run_exact(&["queue", "pause", name]).ok(),
        format!("queue \"{name}\" paused\n")
    );
    assert!(fx.q.inspector().is_paused().await.unwrap());
    // Nothing is claimed from a paused queue, and the CLI's stats say so.
    fx.clock.set(at(3600));
    assert_eq!(worker(&fx.q).run_due().await.unwrap(), 0);
    let stats = fx.run_exact(&["stats", "--json"]).json();
    let ours = stats["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == name)
        .expect("our queue is listed")
        .clone();
    assert_eq!(ours["paused"], true);

    assert_eq!(
        fx.run_exact(&["queue", "unpause", name, "--json"]).json(),
        json!({"queue": name, "paused": false})
    );
    assert!(!fx.q.inspector().is_paused().await.unwrap());
    assert_eq!(
        worker(&fx.q).run_due().await.unwrap(),
        3,
        "the retries run again"
    );
    assert_eq!(
        fx.run_exact(&["queue", "pause", name, "--json"]).json(),
        json!({"queue": name, "paused": true})
    );
    let missing = fx.run_exact(&["queue", "pause"]);
    assert_eq!(missing.code, Some(2));
}

async fn errors_groups_tasks_by_last_err(backend: Backend) {
    let Some(fx) = Fixture::seeded(backend, "errors").await else {
        return;
    };
    let name = fx.name();
    assert_eq!(
        fx.run(&["errors"]).ok(),
        "\
TASKS  OLDEST FAILURE        NEWEST FAILURE        LAST ERR
    2  2023-11-14T22:13:20Z  2023-11-14T22:13:21Z  gateway down
    1  2023-11-14T22:13:22Z  2023-11-14T22:13:22Z  timeout
"
    );
    assert_eq!(
        fx.run(&["errors", "--state", "archived", "--json"]).json(),
        json!({
            "queue": name,
            "state": "archived",
            "groups": [{
                "last_err": "card declined (retries exhausted: 0 of 0)",
                "count": 1,
                "oldest": "2023-11-14T22:13:23Z",
                "newest": "2023-11-14T22:13:23Z",
            }],
        })
    );
    assert_eq!(
        fx.run(&["errors", "--state", "completed"]).ok(),
        "TASKS  OLDEST FAILURE  NEWEST FAILURE  LAST ERR\n"
    );
}

/// Seeded at the start of the real clock's hour (the CLI reads the real clock): the attempts
/// are in this hour or, should the hour turn meanwhile, the one before.
async fn history_prints_attempts_per_hour_or_day(backend: Backend) {
    let Some(fx) = Fixture::new(backend, "history").await else {
        return;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    fx.clock
        .set(UNIX_EPOCH + Duration::from_secs(now - now % 3600));
    for (msg, max_retry) in [("ok", 25), ("down", 0), ("down", 25)] {
        fx.q.enqueue(Task::new("charge", &msg).max_retry(max_retry))
            .await
            .unwrap();
        assert_eq!(worker(&fx.q).run_due().await.unwrap(), 1);
    }
    let json = fx.run(&["history", "--hours", "2", "--json"]).json();
    assert_eq!(json["queue"], json!(fx.name()));
    assert_eq!(json["hours"], json!(2));
    let buckets = json["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 2);
    let sum = |field: &str| {
        buckets
            .iter()
            .map(|b| b[field].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!((sum("processed"), sum("failed")), (3, 2));

    let text = fx.run(&["history", "--hours", "2"]).ok().to_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["START", "(UTC)", "PROCESSED", "FAILED"]
    );
    let busy = lines[1..]
        .iter()
        .find(|line| line.split_whitespace().nth(1) != Some("0"))
        .unwrap_or_else(|| panic!("no busy hour in\n{text}"));
    let cells: Vec<&str> = busy.split_whitespace().collect();
    // Three attempts at the busiest hour: a full bar, two thirds of it failed.
    assert_eq!(
        cells[1..],
        ["3", "2", &format!("{}{}", "#".repeat(27), "=".repeat(13))]
    );
    assert!(cells[0].ends_with(":00:00Z"), "{busy}");

    let days = fx.run(&["history", "--days", "3", "--json"]).json();
    assert_eq!(days["days"], json!(3));
    assert_eq!(days["buckets"].as_array().unwrap().len(), 3);
    // clap refuses what is out of range, and both spans at once (exit code 2).
    for bad in [
        &["history", "--hours", "169"][..],
        &["history", "--days", "0"],
        &["history", "--hours", "1", "--days", "1"],
    ] {
        let run = fx.run(bad);
        assert_eq!(run.code, Some(2), "{bad:?}: {run:?}");
    }
}

/// Seeded by the real clock (the CLI reads it): "today" is today.
async fn stats_shows_every_queue(backend: Backend) {
    let Some(fx) = Fixture::new(backend, "stats").await else {
        return;
    };
    let name = fx.name().to_owned();
    let paused = fx.q.clone().named(format!("{name}-paused"));
    let now = SystemTime::now();
    let three_days = Duration::from_secs(3 * 86_400);
    fx.clock.set(now - three_days);
    fx.q.enqueue(Task::new("report", &0)).await.unwrap();
    fx.clock.set(now);
    for (msg, max_retry) in [("ok", 25), ("down", 0), ("down", 25)] {
        fx.q.enqueue(Task::new("charge", &msg).max_retry(max_retry))
            .await
            .unwrap();
        assert_eq!(worker(&fx.q).run_due().await.unwrap(), 1);
    }
    paused.inspector().pause().await.unwrap();

    let out = fx.run_exact(&["stats"]);
    let text = out.ok();
    let header = "QUEUE PENDING SCHEDULED ACTIVE RETRY ARCHIVED COMPLETED PAUSED PROCESSED TODAY \
                  FAILED TODAY OLDEST PENDING WORKERS";
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>().join(" "),
        header
    );
    let row = |queue: &str| -> String {
        lines
            .iter()
            .find(|line| line.split_whitespace().next() == Some(queue))
            .unwrap_or_else(|| panic!("no row for {queue} in\n{text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Three attempts finished today, two of them failed.
    assert_eq!(row(&name), format!("{name} 1 0 0 1 1 1 no 3 2 3d 0h 0"));
    assert_eq!(
        row(&format!("{name}-paused")),
        format!("{name}-paused 0 0 0 0 0 0 yes 0 0 - 0")
    );
    if let Backend::Sqlite = backend {
        // Alone in the file: the whole table, columns aligned.
        assert_eq!(
            text,
            "\
QUEUE           PENDING  SCHEDULED  ACTIVE  RETRY  ARCHIVED  COMPLETED  PAUSED  PROCESSED TODAY  FAILED TODAY  OLDEST PENDING  WORKERS
default               1          0       0      1         1          1  no                    3             2           3d 0h        0
default-paused        0          0       0      0         0          0  yes                   0             0               -        0
"
        );
    }

    let stats = fx.run_exact(&["stats", "--json"]).json();
    let ours: Vec<&Value> = stats["queues"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["queue"].as_str().unwrap().starts_with(&name))
        .collect();
    let age = ours[0]["oldest_pending_age_secs"].as_u64().unwrap();
    assert!(
        (three_days.as_secs()..three_days.as_secs() + 120).contains(&age),
        "{age}"
    );
    assert_eq!(
        ours[0],
        &json!({
            "queue": name,
            "counts": {"pending": 1, "scheduled": 0, "active": 0, "retry": 1, "archived": 1,
                       "completed": 1},
            "paused": false,
            "processed_today": 3,
            "failed_today": 2,
            "oldest_pending_age_secs": age,
            // The retry task's next attempt (the real clock's: 15 to 44 s from its failure).
            "next_due_at": ours[0]["next_due_at"].as_str().expect("a due time"),
            "workers": 0,
            "running": 0,
        })
    );
    assert_eq!(
        ours[1],
        &json!({
            "queue": format!("{name}-paused"),
            "counts": {"pending": 0, "scheduled": 0, "active": 0, "retry": 0, "archived": 0,
                       "completed": 0},
            "paused": true,
            "processed_today": 0,
            "failed_today": 0,
            "oldest_pending_age_secs": null,
            "next_due_at": null,
            "workers": 0,
            "running": 0,
        })
    );
    let stamp = stats["now"].as_str().unwrap();
    assert!(stamp.len() >= 20 && stamp.ends_with('Z'), "{stamp}");
}

async fn a_bad_queue_name_is_one_clear_line(backend: Backend) {
    let Some(fx) = Fixture::new(backend, "names").await else {
        return;
    };
    fx.run_exact(&["task", "ls", "--state", "retry", "--queue", ""])
        .fails_with("error: a queue name is 1 to 1024 bytes, got 0 bytes");
    let long = "q".repeat(1025);
    fx.run_exact(&["queue", "pause", &long])
        .fails_with("error: a queue name is 1 to 1024 bytes, got 1025 bytes");
}

#[test]
fn the_database_can_come_from_retry_queue_db() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let q = Queue::connect(&url).await.unwrap();
            q.enqueue(Task::new("report", &0).task_id("t1"))
                .await
                .unwrap();
        });
    let out = run(bin()
        .env("RETRY_QUEUE_DB", &url)
        .args(["task", "show", "t1", "--json"]));
    assert_eq!(out.json()["id"], "t1");
}

#[test]
fn no_database_is_a_clap_error_and_a_missing_file_is_not_created() {
    let out = run(bin().arg("stats"));
    assert_eq!((out.code, out.stdout.as_str()), (Some(2), ""));
    assert!(
        out.stderr.starts_with(
            "error: the following required arguments were not provided:\n  --db <URL>\n"
        ),
        "{}",
        out.stderr
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.db");
    run(bin()
        .arg("--db")
        .arg(format!("sqlite://{}", path.display()))
        .arg("stats"))
    .fails_with(&format!(
        "error: no SQLite database at \"{}\" (retry-queue opens an existing file, it does not \
         create one)",
        path.display()
    ));
    assert!(!path.exists());
}

/// Runs `sql` on the SQLite database at `url`, outside the queue.
fn sqlite_exec(url: &str, sql: &str) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let pool = sqlx::SqlitePool::connect(url).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
                .execute(&pool)
                .await
                .unwrap();
            pool.close().await;
        });
}

/// `migrate status|up|down` on a SQLite file (on PostgreSQL the tests share one database,
/// and `down` would drop its tables under them; `tests/tests/durable/migrations.rs` runs the
/// same operations on both backends).
#[test]
fn migrate_shows_applies_and_reverts_the_schema_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    std::fs::File::create(&path).unwrap();
    let url = format!("sqlite://{}", path.display());
    let migrate = |args: &[&str]| run(bin().arg("--db").arg(&url).arg("migrate").args(args));
    let latest = retry_runtime::durable::latest_version();
    let versions: Vec<String> = (1..=latest).map(|v| v.to_string()).collect();

    let status = migrate(&["status"]);
    let lines: Vec<&str> = status.ok().lines().collect();
    assert_eq!(lines[0], format!("schema version 0 (this build: {latest})"));
    assert_eq!(lines[1], "VERSION  NAME      STATE    APPLIED AT");
    assert_eq!(lines[2], "      1  baseline  pending  -");
    assert_eq!(
        lines.last().unwrap(),
        &format!(
            "this build refuses it: version {latest} is not applied: run `retry-queue migrate up`"
        )
    );

    let up = migrate(&["up"]);
    let lines: Vec<&str> = up.ok().lines().collect();
    assert_eq!(lines[0], format!("applied {}", versions.join(", ")));
    assert_eq!(
        lines[1],
        format!("schema version {latest} (this build: {latest})")
    );
    assert!(
        lines[3].starts_with("      1  baseline  applied  20"),
        "{}",
        lines[3]
    );
    assert_eq!(lines.last().unwrap(), &"this build runs on it");
    assert_eq!(migrate(&["up"]).ok().lines().next(), Some("nothing to do"));

    let json = run(bin()
        .arg("--db")
        .arg(&url)
        .args(["--json", "migrate", "status"]))
    .json();
    assert_eq!(json["version"], latest);
    assert_eq!(json["latest"], latest);
    assert_eq!(json["refused"], Value::Null);
    assert_eq!(json["migrations"][0]["name"], "baseline");
    assert_eq!(json["migrations"][0]["state"], "applied");

    // A version a newer build applied, which this one cannot live with: every other command
    // refuses the database in one line; status says why; down leaves it alone.
    let next = latest + 1;
    sqlite_exec(
        &url,
        &format!(
            "INSERT INTO retry_migrations (version, name, checksum, oldest_reader, applied_ms) \
             VALUES ({next}, 'future', 'abc', {next}, 0)"
        ),
    );
    let refused = format!(
        "the task database's schema is at version {next} (future), newer than this build of \
         retry-runtime knows (version {latest}) and not usable by it: upgrade retry-runtime, or \
         revert with the newer build's `retry-queue migrate down --to {latest}`"
    );
    run(bin().arg("--db").arg(&url).arg("stats")).fails_with(&format!("error: {refused}"));
    let status = migrate(&["status"]);
    let lines: Vec<&str> = status.ok().lines().collect();
    assert_eq!(
        lines[0],
        format!("schema version {next} (this build: {latest})")
    );
    assert!(
        lines.contains(
            &format!("{next:>7}  future    newer-unusable  1970-01-01T00:00:00Z").as_str()
        ),
        "{lines:#?}"
    );
    assert_eq!(
        lines.last().unwrap(),
        &format!("this build refuses it: {refused}")
    );
    migrate(&["down", "--to", "0"]).fails_with(&format!(
        "error: migration {next} (future) was applied by a newer build of retry-runtime, which \
         alone knows how to revert it: run its `retry-queue migrate down --to {latest}` first"
    ));

    // Without it, down reverts every version, newest first.
    sqlite_exec(&url, "DELETE FROM retry_migrations WHERE name = 'future'");
    let mut reverted = versions.clone();
    reverted.reverse();
    let down = migrate(&["down", "--to", "0"]);
    assert_eq!(
        down.ok().lines().next(),
        Some(format!("reverted {}", reverted.join(", ")).as_str())
    );
    assert_eq!(
        migrate(&["status"]).ok().lines().next(),
        Some(format!("schema version 0 (this build: {latest})").as_str())
    );
}

#[test]
fn an_unreachable_database_is_one_line_not_a_panic() {
    // Port 1 on loopback: nothing listens there.
    let out = run(bin().args(["--db", "postgres://nobody@127.0.0.1:1/none", "stats"]));
    assert_eq!((out.code, out.stdout.as_str()), (Some(1), ""));
    assert!(
        out.stderr
            .starts_with("error: task queue database unreachable: "),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}

#[test]
fn dash_refuses_a_non_loopback_address_without_a_token() {
    // Checked before the database is opened: the file need not exist.
    let out = run(bin().args([
        "--db",
        "sqlite:///nonexistent/tasks.db",
        "dash",
        "--listen",
        "0.0.0.0:8080",
    ]));
    assert_eq!((out.code, out.stdout.as_str()), (Some(1), ""));
    assert!(
        out.stderr
            .starts_with("error: refusing to listen on 0.0.0.0:8080 without a token"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    let bad = run(bin().args([
        "--db",
        "sqlite:///nonexistent/tasks.db",
        "dash",
        "--listen",
        "not-an-address",
    ]));
    assert_eq!(bad.code, Some(2));
    assert!(
        bad.stderr
            .starts_with("error: invalid value 'not-an-address' for '--listen <LISTEN>'"),
        "{}",
        bad.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// `workers` and `schedulers` (issue 23, items 2–3).

mod presence {
    use super::*;

    retry_tests::both_backends!(
        workers_lists_live_workers_and_their_tasks,
        schedulers_lists_the_entries_of_live_schedulers,
    );

    /// 2100-01-01T00:00:00Z: the clock of these tests' workers and schedulers. The CLI reads on
    /// the system clock, for which rows written at this time are live; every time printed is
    /// still exact.
    const FUTURE: u64 = 4_102_444_800;
    const FUTURE_TEXT: &str = "2100-01-01T00:00:00Z";

    /// The fixture's queue on a clock standing at [`FUTURE`].
    fn in_future(fx: &Fixture) -> Queue {
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(FUTURE));
        fx.q.clone().with_clock(clock)
    }

    /// The JSON of `command` (`workers` or `schedulers`), its `list` field filtered to the
    /// items where `key` names the fixture's queue.
    fn mine(fx: &Fixture, command: &str, list: &str, key: &str) -> (Value, Vec<Value>) {
        let all = fx.run_exact(&[command, "--json"]).json();
        assert_eq!(all.as_object().unwrap().len(), 1, "only `{list}`: {all}");
        let name = json!(fx.name());
        let items = all[list]
            .as_array()
            .unwrap()
            .iter()
            .filter(|item| match &item[key] {
                Value::Array(queues) => queues.contains(&name),
                one => *one == name,
            })
            .cloned()
            .collect();
        (all, items)
    }

    /// The line of `text` whose words start with `first`, its words one space apart.
    fn line_of(text: &str, first: &str) -> String {
        text.lines()
            .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
            .find(|line| line.starts_with(first))
            .unwrap_or_else(|| panic!("no line starting with {first:?} in\n{text}"))
    }

    async fn workers_lists_live_workers_and_their_tasks(backend: Backend) {
        let Some(fx) = Fixture::new(backend, "workers").await else {
            return;
        };
        let (_, none) = mine(&fx, "workers", "workers", "queues");
        assert_eq!(none, Vec::<Value>::new());
        if let Backend::Sqlite = backend {
            assert_eq!(fx.run_exact(&["workers"]).ok(), "no worker is running\n");
        }
        let q = in_future(&fx);
        let release = std::sync::Arc::new(tokio::sync::Notify::new());
        let held = release.clone();
        let worker = Worker::new(q.clone())
            .concurrency(4)
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
        q.enqueue(Task::new("slow", &1).task_id("w1"))
            .await
            .unwrap();
        let mut holding = false;
        for _ in 0..2_000 {
            let workers = q.inspector().workers().await.unwrap();
            if workers
                .iter()
                .any(|w| w.serves(fx.name()) && !w.active.is_empty())
            {
                holding = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(holding, "the worker never reported w1");

        let (_, workers) = mine(&fx, "workers", "workers", "queues");
        assert_eq!(workers.len(), 1, "{workers:?}");
        let w = &workers[0];
        let (id, host) = (w["id"].as_str().unwrap(), w["host"].as_str().unwrap());
        let pid = std::process::id();
        assert_eq!(
            w,
            &json!({
                "id": id,
                "host": host,
                "pid": pid,
                "queues": [fx.name()],
                "concurrency": 4,
                "started_at": FUTURE_TEXT,
                "last_heartbeat_at": FUTURE_TEXT,
                "active": [{"queue": fx.name(), "id": "w1", "kind": "slow", "started_at": FUTURE_TEXT}],
                "leader_of": [fx.name()],
            })
        );
        let text = fx.run_exact(&["workers"]);
        let text = text.ok();
        assert_eq!(
            line_of(text, "WORKER HOST"),
            "WORKER HOST PID QUEUES LEADER OF BUSY STARTED LAST HEARTBEAT"
        );
        assert_eq!(
            line_of(text, id),
            format!(
                "{id} {host} {pid} {} {} 1/4 {FUTURE_TEXT} {FUTURE_TEXT}",
                fx.name(),
                fx.name()
            )
        );
        assert_eq!(
            line_of(text, "WORKER QUEUE"),
            "WORKER QUEUE TASK KIND STARTED"
        );
        assert_eq!(
            line_of(text, &format!("{id} {}", fx.name())),
            format!("{id} {} w1 slow {FUTURE_TEXT}", fx.name())
        );

        // Stopped gracefully: gone at once.
        release.notify_one();
        stop.send(()).unwrap();
        running.await.unwrap().unwrap();
        let (_, gone) = mine(&fx, "workers", "workers", "queues");
        assert_eq!(gone, Vec::<Value>::new());
    }

    async fn schedulers_lists_the_entries_of_live_schedulers(backend: Backend) {
        let Some(fx) = Fixture::new(backend, "schedulers").await else {
            return;
        };
        let (_, none) = mine(&fx, "schedulers", "entries", "queue");
        assert_eq!(none, Vec::<Value>::new());
        if let Backend::Sqlite = backend {
            assert_eq!(
                fx.run_exact(&["schedulers"]).ok(),
                "no scheduler is running\n"
            );
        }
        let q = in_future(&fx);
        let scheduler = retry_runtime::durable::Scheduler::new(q.clone())
            .every(Duration::from_secs(60), || Task::new("tick", &0));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(scheduler.run_until(async {
            stopped.await.ok();
        }));
        let task_id = format!("periodic:tick:every:60000ms:{FUTURE}000");
        let mut listed = false;
        for _ in 0..2_000 {
            let entries = q.inspector().schedulers().await.unwrap();
            if entries
                .iter()
                .any(|e| e.last_task_id.as_deref() == Some(task_id.as_str()))
            {
                listed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(listed, "the scheduler never reported its entry");

        let (_, entries) = mine(&fx, "schedulers", "entries", "queue");
        assert_eq!(entries.len(), 1, "{entries:?}");
        let scheduler_id = entries[0]["scheduler"].as_str().unwrap().to_owned();
        assert_eq!(
            entries[0],
            json!({
                "scheduler": scheduler_id,
                "queue": fx.name(),
                "kind": "tick",
                "spec": "every:60000ms",
                "next_run_at": "2100-01-01T00:01:00Z",
                "last_enqueued_at": FUTURE_TEXT,
                "last_task_id": task_id,
                "last_heartbeat_at": FUTURE_TEXT,
            })
        );
        let text = fx.run_exact(&["schedulers"]);
        let text = text.ok();
        assert_eq!(
            line_of(text, "QUEUE KIND"),
            "QUEUE KIND SPEC NEXT RUN LAST ENQUEUED LAST TASK SCHEDULER"
        );
        assert_eq!(
            line_of(text, &format!("{} tick", fx.name())),
            format!(
                "{} tick every:60000ms 2100-01-01T00:01:00Z {FUTURE_TEXT} {task_id} {scheduler_id}",
                fx.name()
            )
        );

        stop.send(()).unwrap();
        running.await.unwrap().unwrap();
        let (_, gone) = mine(&fx, "schedulers", "entries", "queue");
        assert_eq!(gone, Vec::<Value>::new());
    }
}

#[test]
fn help_lists_workers_and_schedulers() {
    let out = run(bin().arg("--help"));
    let text = out.ok();
    for line in [
        "  workers     The live workers (by their heartbeats): host, pid, queues, queues led, tasks running",
        "  schedulers  The entries of the live schedulers: kind, spec, next run, last enqueue",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
}

/// A `retry-queue dash` child process, killed and reaped when dropped.
struct DashChild(std::process::Child);

impl Drop for DashChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `retry-queue --db URL dash --listen 127.0.0.1:PORT ARGS…` with `env` added, and
/// waits (bounded) until it listens; its base URL.
async fn dash_with(url: &str, args: &[&str], env: &[(&str, &str)]) -> (DashChild, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let mut command = bin();
    command
        .args(["--db", url, "dash", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = DashChild(command.spawn().expect("retry-queue dash starts"));
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return (child, format!("http://127.0.0.1:{port}"));
        }
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("retry-queue dash exited before listening: {status}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("retry-queue dash did not listen within 20 s");
}

/// The status of `GET /api/queues` with `Authorization: Bearer token`.
async fn status_with(base: &str, token: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{base}/api/queues"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

const FILE_TOKEN: &str = "token-from-the-file-0123";
const ENV_TOKEN: &str = "token-from-the-environment";

#[tokio::test]
async fn dash_reads_its_token_from_a_file_or_the_environment_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    Queue::connect(&url).await.unwrap().close().await;
    let file = dir.path().join("token");
    std::fs::write(&file, format!("  {FILE_TOKEN}\n")).unwrap();
    let file = file.to_str().unwrap();

    // From the file, trimmed.
    let (_child, base) = dash_with(&url, &["--token-file", file], &[]).await;
    assert_eq!(status_with(&base, FILE_TOKEN).await, 200);
    assert_eq!(status_with(&base, &FILE_TOKEN[1..]).await, 401);
    assert_eq!(status_with(&base, "").await, 401);

    // From RETRY_QUEUE_TOKEN, trimmed.
    let padded = format!("\t{ENV_TOKEN} ");
    let (_child, base) = dash_with(&url, &[], &[("RETRY_QUEUE_TOKEN", &padded)]).await;
    assert_eq!(status_with(&base, ENV_TOKEN).await, 200);
    assert_eq!(status_with(&base, FILE_TOKEN).await, 401);

    // A flag wins over the environment.
    let (_child, base) = dash_with(
        &url,
        &["--token-file", file],
        &[("RETRY_QUEUE_TOKEN", ENV_TOKEN)],
    )
    .await;
    assert_eq!(status_with(&base, FILE_TOKEN).await, 200);
    assert_eq!(status_with(&base, ENV_TOKEN).await, 401);
}

#[test]
fn dash_refuses_a_short_token_two_token_flags_and_an_unreadable_file() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short");
    std::fs::write(&short, "  fifteen-chars-x \n").unwrap();
    let short = short.to_str().unwrap();
    let db = "sqlite:///nonexistent/tasks.db";
    let message = "error: the dashboard's token has 15 characters: it needs at least 16 \
                   (surrounding whitespace does not count); `openssl rand -hex 16` makes one\n";
    // Refused before the database is opened (the file need not exist), from every source.
    for out in [
        run(bin().args(["--db", db, "dash", "--token-file", short])),
        run(bin()
            .args(["--db", db, "dash"])
            .env("RETRY_QUEUE_TOKEN", " fifteen-chars-x")),
        run(bin().args(["--db", db, "dash", "--token", "fifteen-chars-x"])),
    ] {
        assert_eq!(
            (out.code, out.stdout.as_str(), out.stderr.as_str()),
            (Some(1), "", message)
        );
    }
    let blank = run(bin()
        .args(["--db", db, "dash", "--listen", "0.0.0.0:8080"])
        .env("RETRY_QUEUE_TOKEN", "   "));
    blank.fails_with("error: the dashboard's token is blank");
    // An empty variable is a blank token, not "no token": before, the dashboard started
    // without one and without a word.
    let empty = run(bin()
        .args(["--db", db, "dash"])
        .env("RETRY_QUEUE_TOKEN", ""));
    assert_eq!(
        (empty.code, empty.stdout.as_str(), empty.stderr.as_str()),
        (Some(1), "", "error: the dashboard's token is blank\n")
    );
    // Long enough, but 16 times the same character.
    let weak = run(bin()
        .args(["--db", db, "dash"])
        .env("RETRY_QUEUE_TOKEN", "aaaaaaaaaaaaaaaa"));
    assert_eq!(
        (weak.code, weak.stderr.as_str()),
        (
            Some(1),
            "error: the dashboard's token has only 1 different characters: it needs at least 8; \
             `openssl rand -hex 16` makes one\n"
        )
    );
    // An endless token file (a device) is refused unread, not read for ever.
    let endless = run(bin().args(["--db", db, "dash", "--token-file", "/dev/zero"]));
    assert_eq!(
        (endless.code, endless.stderr.as_str()),
        (
            Some(1),
            "error: the token file /dev/zero is not a regular file (a device): give a file \
             holding the token, or the token in RETRY_QUEUE_TOKEN\n"
        )
    );
    let both = run(bin().args([
        "--db",
        db,
        "dash",
        "--token",
        "sixteen-chars-ok",
        "--token-file",
        short,
    ]));
    assert_eq!(both.code, Some(2));
    assert!(
        both.stderr.starts_with(
            "error: the argument '--token <T>' cannot be used with '--token-file <PATH>'"
        ),
        "{}",
        both.stderr
    );
    let missing = dir.path().join("missing");
    let out = run(bin()
        .args(["--db", db, "dash", "--token-file"])
        .arg(&missing));
    assert_eq!((out.code, out.stdout.as_str()), (Some(1), ""));
    assert!(
        out.stderr.starts_with(&format!(
            "error: cannot read the token file {}: ",
            missing.display()
        )),
        "{}",
        out.stderr
    );
    // The help says where a token comes from, and that argv is visible.
    let help = run(bin().args(["dash", "--help"]));
    let help = help.ok();
    assert!(help.contains("--token-file <PATH>"), "{help}");
    assert!(help.contains("RETRY_QUEUE_TOKEN"), "{help}");
    assert!(help.contains("`ps`"), "{help}");
}

/// Issue 23, items 4–5: `task ls --kind/--search`, `task kinds`, `task batch`.
mod find_and_batch {
    use super::*;

    retry_tests::both_backends!(
        task_ls_finds_by_kind_and_search,
        task_kinds_lists_the_kinds_of_a_state,
        task_batch_acts_on_each_id_and_reports_the_refusals,
    );
}

async fn task_ls_finds_by_kind_and_search(backend: Backend) {
    let Some(fx) = Fixture::seeded(backend, "find").await else {
        return;
    };
    let name = fx.name();
    assert_eq!(
        fx.run(&["task", "ls", "--state", "retry", "--search", "GATEWAY"])
            .ok(),
        format!(
            "\
ID  KIND    RETRIED  NEXT PROCESS AT       LAST FAILED AT        LAST ERR
r1  charge     1/25  2023-11-14T22:13:42Z  2023-11-14T22:13:20Z  gateway down
r2  charge     1/25  2023-11-14T22:13:43Z  2023-11-14T22:13:21Z  gateway down
2 found among 3 retry tasks in queue \"{name}\"
searched 3 tasks
"
        )
    );
    let reports = fx
        .run(&[
            "task", "ls", "--state", "pending", "--kind", "report", "--json",
        ])
        .json();
    assert_eq!(reports["tasks"][0]["id"], json!("p1"));
    assert_eq!(
        (
            &reports["kind"],
            &reports["search"],
            &reports["searched"],
            &reports["next"]
        ),
        (&json!("report"), &Value::Null, &Value::Null, &Value::Null)
    );
    let first = fx
        .run(&[
            "task", "ls", "--state", "retry", "--search", "gateway", "--size", "1", "--json",
        ])
        .json();
    assert_eq!(first["tasks"][0]["id"], json!("r1"));
    assert_eq!(first["searched"], json!(1));
    let next = first["next"].as_str().expect("a cursor").to_owned();
    let second = fx
        .run(&[
            "task", "ls", "--state", "retry", "--search", "gateway", "--size", "1", "--after",
            &next, "--json",
        ])
        .json();
    assert_eq!(second["tasks"][0]["id"], json!("r2"));
    assert_eq!(
        (&second["searched"], &second["next"]),
        (&json!(2), &Value::Null)
    );
    // A filter pages by cursor: --page is a command-line error (clap's exit status 2).
    let paged = fx.run(&[
        "task", "ls", "--state", "retry", "--kind", "charge", "--page", "2",
    ]);
    assert_eq!(paged.code, Some(2), "{paged:?}");
    assert!(paged.stderr.contains("--page"), "{}", paged.stderr);
    fx.run(&[
        "task",
        "ls",
        "--state",
        "retry",
        "--search",
        &"x".repeat(300),
    ])
    .fails_with("error: a search text holds at most 256 bytes, got 300");
}

async fn task_kinds_lists_the_kinds_of_a_state(backend: Backend) {
    let Some(fx) = Fixture::seeded(backend, "kinds").await else {
        return;
    };
    assert_eq!(
        fx.run(&["task", "kinds", "--state", "retry"]).ok(),
        "charge\n"
    );
    fx.q.enqueue(Task::new("audit", &0).task_id("p2"))
        .await
        .unwrap();
    assert_eq!(
        fx.run(&["task", "kinds", "--state", "pending"]).ok(),
        "audit\nreport\n"
    );
    assert_eq!(
        fx.run(&["task", "kinds", "--state", "active", "--json"])
            .json(),
        json!({"queue": fx.name(), "state": "active", "kinds": ["report"]})
    );
}

async fn task_batch_acts_on_each_id_and_reports_the_refusals(backend: Backend) {
    let Some(fx) = Fixture::seeded(backend, "batch").await else {
        return;
    };
    let name = fx.name();
    assert_eq!(
        fx.run(&["task", "batch", "run", "a1", "r1", "nope", "busy"])
            .ok(),
        format!(
            "\
run: 2 of 4 tasks of queue \"{name}\" done
not done: \"nope\": no such task
not done: \"busy\": active: a worker holds its lease; wait for the attempt to end
"
        )
    );
    let state = |id: &'static str| {
        let q = fx.q.clone();
        async move { q.inspector().get(id).await.unwrap().unwrap().state }
    };
    assert_eq!(state("a1").await, TaskState::Pending);
    assert_eq!(state("r1").await, TaskState::Pending);
    assert_eq!(
        fx.run(&["task", "batch", "delete", "r2", "c1", "--json"])
            .json(),
        json!({"queue": name, "action": "delete", "done": 2, "failed": []})
    );
    assert!(fx.q.inspector().get("c1").await.unwrap().is_none());
    let canceled = fx
        .run(&["task", "batch", "cancel", "busy", "s1", "--json"])
        .json();
    assert_eq!(canceled["done"], json!(2));
    assert_eq!(state("s1").await, TaskState::Archived);
    // An unknown action or no id: clap refuses the command line.
    for args in [
        &["task", "batch", "explode", "r3"][..],
        &["task", "batch", "run"][..],
    ] {
        let refused = fx.run(args);
        assert_eq!(refused.code, Some(2), "{args:?}: {refused:?}");
    }
    assert_eq!(state("r3").await, TaskState::Retry);
}

/// A queue name, an id, a kind and an error carrying U+202E (RIGHT-TO-LEFT OVERRIDE): every
/// table shows it as `\u{202e}`, never raw (which reversed what followed it on the terminal).
#[tokio::test]
async fn bidirectional_controls_are_escaped_in_errors_stats_and_task_ls() {
    let fx = Fixture::new(Backend::Sqlite, "bidi").await.unwrap();
    let worker = Worker::new(fx.q.clone()).rng(DelayRng::fixed(0)).handle(
        "ch\u{202E}arge",
        |task| async move {
            let why: String = task.payload()?;
            Err(BoxError::from(why))
        },
    );
    fx.q.enqueue(
        Task::new("ch\u{202E}arge", &"card \u{202E}deripxe").task_id("evil\u{202E}gpj.exe"),
    )
    .await
    .unwrap();
    assert_eq!(worker.run_due().await.unwrap(), 1);
    fx.q.clone()
        .named("ops\u{202E}x")
        .enqueue(Task::new("report", &1))
        .await
        .unwrap();
    for args in [
        &["stats"][..],
        &["task", "ls", "--state", "retry"],
        &["errors", "--state", "retry"],
        &["task", "show", "evil\u{202E}gpj.exe"],
    ] {
        let out = fx.run(args);
        let text = out.ok();
        assert!(
            !text.contains('\u{202E}'),
            "{args:?}: a raw U+202E in\n{text}"
        );
        assert!(text.contains("\\u{202e}"), "{args:?}: no escape in\n{text}");
    }
    let ls = fx.run(&["task", "ls", "--state", "retry"]);
    assert!(
        ls.ok().contains("evil\\u{202e}gpj.exe  ch\\u{202e}arge"),
        "{}",
        ls.stdout
    );
    let stats = fx.run(&["stats"]);
    assert!(stats.ok().contains("ops\\u{202e}x"), "{}", stats.stdout);
}

/// The `retry_*` tables of the SQLite file at `url`.
async fn retry_tables(url: &str) -> Vec<String> {
    let pool = sqlx::SqlitePool::connect(url).await.unwrap();
    let names: Vec<(String,)> = sqlx::query_as(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'retry\\_%' ESCAPE '\\' \
         ORDER BY name",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    names.into_iter().map(|(name,)| name).collect()
}

/// Runs `retry-queue --db URL ARGS…` for at most 20 s (a dashboard that started is stopped
/// and reported as such).
fn run_bounded(url: &str, args: &[&str]) -> Run {
    let mut child = bin()
        .arg("--db")
        .arg(url)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    for _ in 0..200 {
        if child.try_wait().unwrap().is_some() {
            return run_output(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    panic!(
        "{args:?} still ran after 20 s: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The commands that only read, as an operator points them at a database.
const READ_ONLY_COMMANDS: [&[&str]; 10] = [
    &["stats"],
    &["task", "ls", "--state", "pending"],
    &["task", "kinds", "--state", "pending"],
    &["errors"],
    &["history"],
    &["workers"],
    &["systems"],
    &["schedulers"],
    &["--json", "stats"],
    &["dash", "--read-only", "--listen", "127.0.0.1:0"],
];

#[tokio::test]
async fn commands_that_read_never_create_the_schema_in_an_empty_or_foreign_database() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.db");
    std::fs::File::create(&empty).unwrap();
    let app = dir.path().join("app.db");
    let app_url = format!("sqlite://{}?mode=rwc", app.display());
    let pool = sqlx::SqlitePool::connect(&app_url).await.unwrap();
    sqlx::query("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    for path in [&empty, &app] {
        let url = format!("sqlite://{}", path.display());
        for args in READ_ONLY_COMMANDS {
            let out = run_bounded(&url, args);
            assert_eq!(
                (out.code, out.stdout.as_str()),
                (Some(1), ""),
                "{args:?}: {}",
                out.stderr
            );
            assert!(
                out.stderr.contains("no task queue schema")
                    && out.stderr.contains("run `retry-queue migrate up`"),
                "{args:?}: {}",
                out.stderr
            );
            assert_eq!(retry_tables(&url).await, Vec::<String>::new(), "{args:?}");
        }
    }
}

#[tokio::test]
async fn a_foreign_retry_tasks_table_is_named_by_every_command_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let url = format!("sqlite://{}", path.display());
    let pool = sqlx::SqlitePool::connect(&format!("{url}?mode=rwc"))
        .await
        .unwrap();
    // The application's own table of retries: not the queue's.
    sqlx::query("CREATE TABLE retry_tasks (id INTEGER PRIMARY KEY, url TEXT, attempts INTEGER)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let migrate_up: &[&str] = &["migrate", "up"];
    for args in READ_ONLY_COMMANDS.iter().copied().chain([migrate_up]) {
        let out = run_bounded(&url, args);
        assert_eq!(out.code, Some(1), "{args:?}: {}", out.stdout);
        assert!(
            out.stderr
                .contains("the table retry_tasks is not the task queue's")
                && out
                    .stderr
                    .contains("lacks the columns queue, kind, payload, state"),
            "{args:?}: {}",
            out.stderr
        );
        assert_eq!(retry_tables(&url).await, ["retry_tasks"], "{args:?}");
    }
}

/// A SQLite file with the queue's schema, in `dir`.
async fn migrated_db(dir: &std::path::Path) -> String {
    let url = format!("sqlite://{}", dir.join("tasks.db").display());
    Queue::connect(&url).await.unwrap().close().await;
    url
}

#[tokio::test]
async fn dash_refuses_a_non_ascii_token_and_a_token_file_that_is_not_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let url = migrated_db(dir.path()).await;
    // A browser cannot send it in a header, and curl's UTF-8 bytes never matched: refused.
    let out = run_bounded(&url, &["dash", "--token", "jeton-àéîõü-0123456789"]);
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (
            Some(1),
            "",
            "error: the dashboard's token has a character that is not printable ASCII ('à'): \
             a browser cannot send it in a header; `openssl rand -hex 16` makes one\n"
        )
    );
    // A FIFO nobody writes to: refused at once, not waited on for ever.
    let fifo = dir.path().join("token.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let fifo = fifo.to_str().unwrap();
    let out = run_bounded(&url, &["dash", "--token-file", fifo]);
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (
            Some(1),
            "",
            format!(
                "error: the token file {fifo} is not a regular file (a FIFO): give a file \
                 holding the token, or the token in RETRY_QUEUE_TOKEN\n"
            )
            .as_str()
        )
    );
}

#[tokio::test]
async fn dash_binds_before_printing_its_url() {
    let dir = tempfile::tempdir().unwrap();
    let url = migrated_db(dir.path()).await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let out = run_bounded(&url, &["dash", "--listen", &listen]);
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (Some(1), ""),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.starts_with(&format!(
            "error: cannot listen on {listen}: Address already in use"
        )),
        "{}",
        out.stderr
    );
}
