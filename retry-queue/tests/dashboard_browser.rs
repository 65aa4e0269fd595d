//! The dashboard in a real browser, as an operator uses it: headless Chromium driven through
//! chromedriver (WebDriver, with `fantoccini`) against the built `retry-queue dash` binary on
//! 127.0.0.1, over a seeded SQLite queue. It reads the Retry tab and its `last_err`, presses
//! **Run** on a task and sees it leave the tab, presses **Delete** on an archived task and sees
//! it gone, opens the Failing view, and checks that a `last_err` of
//! `<script>alert(1)</script>` shows as text (and runs nothing). It takes the screenshot of the
//! README: `target/tmp/dashboard.png`, and `docs/dashboard.png` (with `dashboard-workers.png`
//! and `dashboard-task.png`) with `UPDATE_SCREENSHOT=1`. The last case does it all again on a
//! database of a million tasks (`RETRY_BROWSER_TASKS` to change the size) and reports the first
//! paint of a queue page with its chart on stderr.
//!
//! Needs the Debian packages `chromium` and `chromium-driver` (`.ci/run` installs them), or
//! `RETRY_TEST_CHROMIUM` naming a Chromium binary and a `chromedriver` on the PATH; without
//! them the test says loudly on stderr that it was SKIPPED, and passes.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use fantoccini::error::CmdError;
use fantoccini::{Client, ClientBuilder, Locator};
use retry_runtime::BoxError;
use retry_runtime::durable::{ArchiveReason, ManualClock, Queue, Task, TaskState, Worker};
use serde_json::{Value, json};

/// Debian's Chromium; `RETRY_TEST_CHROMIUM` names another binary.
const CHROMIUM: &str = "/usr/bin/chromium";
const HOSTILE: &str = "<script>alert(1)</script>";
const TOKEN: &str = "s3cret-operator-token";
const GATEWAY_DOWN: &str = "payments gateway: 503 Service Unavailable";
/// Every wait of the test is bounded by this.
const PATIENCE: Duration = Duration::from_secs(20);

/// A child process killed (and reaped) when dropped, whatever happens to the test.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn skip(why: &str) {
    // Straight to stderr: the test harness hides the output of a passing test.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "*** SKIPPED: browser test `dashboard_browser` did NOT run: {why} \
             (`apt-get install chromium chromium-driver` installs them; .ci/run does)\n"
        )
        .as_bytes(),
    );
}

/// chromedriver on the PATH or in /usr/bin.
fn chromedriver() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("chromedriver"))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

/// Waits (bounded) until something accepts connections on `port`.
async fn wait_for_port(port: u16, what: &str, child: &mut Child) {
    let start = Instant::now();
    while start.elapsed() < PATIENCE {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before listening: {status}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} did not listen on 127.0.0.1:{port} within {PATIENCE:?}");
}

/// Seeds a SQLite file as an afternoon of failures leaves it, the last attempts a minute ago
/// (the queue's clock runs from 20 minutes ago; the dashboard reads the system clock):
///
/// - `default`: 12 charges in Retry with [`GATEWAY_DOWN`] (`ord-1001` … `ord-1012`, retried 2
///   or 3 times), `evil-1` in Retry with the `last_err` [`HOSTILE`], 3 in Archived (`dead-1` …,
///   "card expired"), 4 pending and 2 scheduled reports, 16 completed;
/// - `emails`: paused, 3 in Retry ("smtp: connection refused"), 2 pending;
/// - `reports`: 5 completed.
async fn seed(url: &str) {
    let clock = ManualClock::new(SystemTime::now() - Duration::from_secs(20 * 60));
    let base = Queue::connect(url)
        .await
        .expect("SQLite opens a new file")
        .with_clock(clock.clone());
    let worker = |q: &Queue| {
        Worker::new(q.clone())
            .concurrency(32)
            .retry_delay(|n, _err, _task| Duration::from_secs(240 * (u64::from(n) + 1)))
            .handle("charge", |task| async move {
                let order: Value = task.payload()?;
                Err(BoxError::from(
                    order["fail"].as_str().unwrap_or("?").to_owned(),
                ))
            })
            .handle("send", |task| async move {
                let mail: Value = task.payload()?;
                Err(BoxError::from(
                    mail["fail"].as_str().unwrap_or("?").to_owned(),
                ))
            })
            .handle("ok", |_task| async { Ok::<(), BoxError>(()) })
    };
    let default = base.clone();
    let emails = base.clone().named("emails");
    let reports = base.clone().named("reports");
    let (wd, we, wr) = (worker(&default), worker(&emails), worker(&reports));
    let charge = |id: &str, n: u64, fail: &str| {
        Task::new(
            "charge",
            &json!({"order": n, "cents": 1999 + n, "fail": fail}),
        )
        .task_id(id)
    };
    let enqueue = |q: &Queue, task: Task| {
        let q = q.clone();
        async move {
            q.enqueue(task).await.expect("enqueue");
        }
    };

    // 20 min ago: the gateway goes down for the first five orders.
    for n in 1..=5 {
        enqueue(
            &default,
            charge(&format!("ord-{}", 1000 + n), 1000 + n, GATEWAY_DOWN),
        )
        .await;
    }
    for n in 0..8 {
        enqueue(&default, Task::new("ok", &n)).await;
        enqueue(&reports, Task::new("ok", &n)).await;
    }
    wd.run_due().await.unwrap();
    wr.run_due().await.unwrap();
    // 15 min ago: their first retries fail, and seven more orders.
    clock.advance(Duration::from_secs(5 * 60));
    for n in 6..=12 {
        enqueue(
            &default,
            charge(&format!("ord-{}", 1000 + n), 1000 + n, GATEWAY_DOWN),
        )
        .await;
    }
    for n in 1..=3 {
        enqueue(
            &default,
            charge(
                &format!("dead-{n}"),
                2000 + n,
                "card expired (402 Payment Required)",
            )
            .max_retry(0),
        )
        .await;
        enqueue(
            &emails,
            Task::new(
                "send",
                &json!({"to": format!("user{n}@example.com"), "fail": "smtp: connection refused (mail.internal:25)"}),
            )
            .task_id(format!("mail-{n}")),
        )
        .await;
    }
    enqueue(&default, charge("evil-1", 666, HOSTILE)).await;
    wd.run_due().await.unwrap();
    we.run_due().await.unwrap();
    // 1 min ago: every charge fails once more; reports wait for a worker of their own.
    clock.advance(Duration::from_secs(14 * 60));
    wd.run_due().await.unwrap();
    for n in 8..16 {
        enqueue(&default, Task::new("ok", &n)).await;
    }
    wd.run_due().await.unwrap();
    for n in 1..=4 {
        enqueue(
            &default,
            Task::new("report", &json!({"day": n})).task_id(format!("rep-{n}")),
        )
        .await;
    }
    for n in 5..=6 {
        enqueue(
            &default,
            Task::new("report", &json!({"day": n}))
                .task_id(format!("rep-{n}"))
                .process_in(Duration::from_secs(3600)),
        )
        .await;
    }
    for n in 1..=2 {
        enqueue(
            &emails,
            Task::new("welcome", &n).task_id(format!("welcome-{n}")),
        )
        .await;
    }
    emails.inspector().pause().await.unwrap();
    assert_eq!(
        default.inspector().count(TaskState::Retry).await.unwrap(),
        13
    );
    assert_eq!(
        default
            .inspector()
            .count(TaskState::Archived)
            .await
            .unwrap(),
        3
    );
    base.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_reads_runs_and_deletes_tasks_in_a_real_browser() {
    let chromium = std::env::var("RETRY_TEST_CHROMIUM").unwrap_or_else(|_| CHROMIUM.to_owned());
    if !Path::new(&chromium).is_file() {
        return skip(&format!("no Chromium at {chromium}"));
    }
    let Some(driver) = chromedriver() else {
        return skip("no chromedriver");
    };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    seed(&url).await;

    let driver_port = free_port();
    let mut chromedriver = Killed(
        Command::new(driver)
            .arg(format!("--port={driver_port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts"),
    );
    wait_for_port(driver_port, "chromedriver", &mut chromedriver.0).await;

    let dash_port = free_port();
    let mut dash = Killed(
        Command::new(env!("CARGO_BIN_EXE_retry-queue"))
            .args(["--db", &url, "dash", "--listen"])
            .arg(format!("127.0.0.1:{dash_port}"))
            .stdout(Stdio::null())
            .spawn()
            .expect("retry-queue dash starts"),
    );
    wait_for_port(dash_port, "retry-queue dash", &mut dash.0).await;
    // The same queue behind a token, read-only.
    let guarded_port = free_port();
    let mut guarded = Killed(
        Command::new(env!("CARGO_BIN_EXE_retry-queue"))
            .args([
                "--db",
                &url,
                "dash",
                "--read-only",
                "--token",
                TOKEN,
                "--listen",
            ])
            .arg(format!("127.0.0.1:{guarded_port}"))
            .stdout(Stdio::null())
            .spawn()
            .expect("retry-queue dash --read-only --token starts"),
    );
    wait_for_port(
        guarded_port,
        "retry-queue dash --read-only --token",
        &mut guarded.0,
    )
    .await;

    let client = chromium_session(&chromium, driver_port).await;

    // The steps run inside a block, so that the browser is closed whatever they find.
    let outcome = tokio::time::timeout(Duration::from_secs(120), async {
        operate(&client, &format!("http://127.0.0.1:{dash_port}")).await?;
        operate_guarded(&client, &format!("http://127.0.0.1:{guarded_port}")).await
    })
    .await;
    let _ = client.close().await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => panic!("the browser steps took more than 2 minutes"),
    }

    // What the browser did is in the database.
    let q = Queue::connect(&url).await.unwrap();
    assert_eq!(
        q.inspector().get("ord-1001").await.unwrap().unwrap().state,
        TaskState::Pending
    );
    assert!(q.inspector().get("dead-1").await.unwrap().is_none());
    assert_eq!(q.inspector().count(TaskState::Retry).await.unwrap(), 12);
    assert_eq!(q.inspector().count(TaskState::Archived).await.unwrap(), 0);
}

/// A failed step: what was expected, in words.
type Step = Result<(), String>;

fn cmd(what: &str) -> impl Fn(CmdError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Waits (bounded) for the first element matching `css`.
async fn find(c: &Client, css: &str) -> Result<fantoccini::elements::Element, String> {
    c.wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css(css))
        .await
        .map_err(cmd(&format!("no `{css}` within {PATIENCE:?}")))
}

/// Waits (bounded) until `check` of the page's text content of `css` elements holds.
async fn wait_texts(
    c: &Client,
    css: &str,
    what: &str,
    check: impl Fn(&[String]) -> bool,
) -> Result<Vec<String>, String> {
    let start = Instant::now();
    let mut last = Vec::new();
    while start.elapsed() < PATIENCE {
        let found = c
            .execute(
                "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.textContent)",
                vec![json!(css)],
            )
            .await
            .map_err(cmd("reading the page"))?;
        last = serde_json::from_value::<Vec<String>>(found).unwrap_or_default();
        if check(&last) {
            return Ok(last);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "{what}: `{css}` never did within {PATIENCE:?}; last seen {last:?}"
    ))
}

/// Clicks the element of `css`, finding it again if an auto-refresh replaced it meanwhile.
async fn click(c: &Client, css: &str) -> Step {
    let mut last = String::new();
    for _ in 0..5 {
        let element = find(c, css).await?;
        match element.click().await {
            Ok(()) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!("clicking `{css}`: {last}"))
}

/// `data-id` values of the task rows shown.
async fn row_ids(c: &Client) -> Result<Vec<String>, String> {
    let found = c
        .execute(
            "return Array.from(document.querySelectorAll('#tasks tr.task')).map(r => r.dataset.id)",
            vec![],
        )
        .await
        .map_err(cmd("reading the rows"))?;
    Ok(serde_json::from_value(found).unwrap_or_default())
}

async fn wait_rows(
    c: &Client,
    what: &str,
    check: impl Fn(&[String]) -> bool,
) -> Result<Vec<String>, String> {
    let start = Instant::now();
    let mut last = Vec::new();
    while start.elapsed() < PATIENCE {
        last = row_ids(c).await?;
        if check(&last) {
            return Ok(last);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("{what}: never within {PATIENCE:?}; rows {last:?}"))
}

fn no_alert(result: Result<String, CmdError>) -> Step {
    match result {
        Err(e) if e.is_no_such_alert() => Ok(()),
        Err(e) => Err(format!("asking for an alert: {e}")),
        Ok(text) => Err(format!("an alert is open: {text:?}")),
    }
}

async fn operate(c: &Client, base: &str) -> Step {
    // The overview: one row per queue, with its counts.
    c.goto(&format!("{base}/"))
        .await
        .map_err(cmd("opening the page"))?;
    viewport(c, 1280, 800).await?;
    find(c, "tr.queue-row[data-queue='default']").await?;
    wait_texts(
        c,
        "tr.queue-row[data-queue='default'] td.count-retry",
        "13 in Retry",
        |t| t == ["13"],
    )
    .await?;
    wait_texts(
        c,
        "tr.queue-row[data-queue='default'] td.count-archived",
        "3 archived",
        |t| t == ["3"],
    )
    .await?;
    wait_texts(
        c,
        "tr.queue-row[data-queue='emails'] .badge.paused",
        "emails paused",
        |t| t == ["paused"],
    )
    .await?;
    wait_texts(c, "tr.queue-row", "three queues", |t| t.len() == 3).await?;
    save_screenshot(c, "dashboard-overview.png").await?;

    // Into the queue: its Retry tab, with the seeded error on every charge.
    click(c, "tr.queue-row[data-queue='default'] a.queue-link").await?;
    find(c, "a.tab.current[data-state='retry']").await?;
    let rows = wait_rows(c, "13 rows in Retry", |r| r.len() == 13).await?;
    if !rows.iter().any(|id| id == "ord-1001") {
        return Err(format!("ord-1001 not in Retry: {rows:?}"));
    }
    wait_texts(
        c,
        "tr.task[data-id='ord-1001'] td.last-err",
        "the gateway error",
        |t| t == [GATEWAY_DOWN],
    )
    .await?;
    wait_texts(
        c,
        "tr.task[data-id='ord-1001'] td.retried",
        "retried 3 of 25",
        |t| t == ["3/25"],
    )
    .await?;
    wait_texts(
        c,
        "tr.task[data-id='ord-1012'] td.next .rel",
        "a retry in a few minutes",
        |t| t.len() == 1 && t[0].starts_with("in "),
    )
    .await?;

    // The hostile error is text: the cell's text is the markup, and it made no element.
    wait_texts(
        c,
        "tr.task[data-id='evil-1'] td.last-err",
        "the script as text",
        |t| t == [HOSTILE],
    )
    .await?;
    let scripts = c
        .execute(
            "return document.querySelectorAll('main script, #tasks script').length",
            vec![],
        )
        .await
        .map_err(cmd("counting scripts"))?;
    if scripts != json!(0) {
        return Err(format!(
            "a <script> element made it into the table: {scripts}"
        ));
    }
    no_alert(c.get_alert_text().await)?;

    // A payload opens on demand.
    click(c, "tr.task[data-id='ord-1001'] button.expand").await?;
    wait_texts(
        c,
        "tr.payload-row[data-id='ord-1001']:not([hidden]) pre.payload",
        "the payload",
        |t| t.len() == 1 && t[0].contains("\"order\": 1001"),
    )
    .await?;
    c.execute(
        "document.querySelector(\"tr.payload-row[data-id='ord-1001']\").scrollIntoView({block: 'center'})",
        vec![],
    )
    .await
    .map_err(cmd("scrolling"))?;
    save_screenshot(c, "dashboard-details.png").await?;
    click(c, "tr.task[data-id='ord-1001'] button.expand").await?;

    // The screenshot of the README: the Retry tab of a queue in trouble (the pointer moved
    // off the buttons, by a click on the title).
    click(c, "#queue-name").await?;
    c.execute(
        "document.activeElement.blur(); window.scrollTo(0, 0)",
        vec![],
    )
    .await
    .map_err(cmd("scrolling"))?;
    save_screenshot(c, "dashboard.png").await?;

    // Run: the task leaves the Retry tab.
    click(c, "tr.task[data-id='ord-1001'] button[data-action='run']").await?;
    wait_rows(c, "ord-1001 gone from Retry", |r| {
        r.len() == 12 && !r.iter().any(|id| id == "ord-1001")
    })
    .await?;
    wait_texts(c, "#flash", "a confirmation", |t| {
        t.len() == 1 && t[0].contains("ord-1001")
    })
    .await?;
    wait_texts(
        c,
        "a.tab[data-state='retry'] .count",
        "the tab's count",
        |t| t == ["12"],
    )
    .await?;

    // Delete in the Archived tab: the task is gone.
    click(c, "a.tab[data-state='archived']").await?;
    wait_rows(c, "3 archived rows", |r| r.len() == 3).await?;
    wait_texts(
        c,
        "tr.task[data-id='dead-1'] td.last-err",
        "the archived error",
        |t| t.len() == 1 && t[0].starts_with("card expired"),
    )
    .await?;
    click(c, "tr.task[data-id='dead-1'] button[data-action='delete']").await?;
    wait_rows(c, "dead-1 deleted", |r| {
        r.len() == 2 && !r.iter().any(|id| id == "dead-1")
    })
    .await?;

    // The Failing view groups the errors, the hostile one as text again.
    click(c, "a.tab[data-state='failing']").await?;
    wait_texts(
        c,
        "table.groups[data-state='retry'] tr.group td.count",
        "group sizes",
        |t| t == ["11", "1"],
    )
    .await?;
    wait_texts(
        c,
        "table.groups[data-state='retry'] tr.group td.last-err",
        "grouped errors",
        |t| t == [GATEWAY_DOWN, HOSTILE],
    )
    .await?;
    no_alert(c.get_alert_text().await)?;
    save_screenshot(c, "dashboard-failing.png").await?;

    // Delete all in the Archived tab asks first: Cancel keeps them, Yes deletes them.
    click(c, "a.tab[data-state='archived']").await?;
    wait_rows(c, "2 archived rows", |r| r.len() == 2).await?;
    click(c, "#delete-all").await?;
    wait_texts(c, "#confirm-text", "a question", |t| {
        t.len() == 1 && t[0].starts_with("Delete all 2 archived tasks")
    })
    .await?;
    click(c, "#confirm-no").await?;
    wait_texts(c, "#confirm:not([hidden])", "the question gone", |t| {
        t.is_empty()
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    wait_rows(c, "still 2 archived rows", |r| r.len() == 2).await?;
    click(c, "#delete-all").await?;
    click(c, "#confirm-yes").await?;
    wait_rows(c, "no archived row", |r| r.is_empty()).await?;
    wait_texts(c, "#empty", "the empty tab", |t| {
        t == ["No archived tasks."]
    })
    .await?;
    Ok(())
}

/// The read-only dashboard with a token: the page asks for the token (a wrong one is refused),
/// then shows the tasks without any button.
async fn operate_guarded(c: &Client, base: &str) -> Step {
    c.goto(&format!("{base}/#/q/default/retry"))
        .await
        .map_err(cmd("opening the guarded page"))?;
    find(c, "#login:not([hidden])").await?;
    let input = find(c, "#token-input").await?;
    input
        .send_keys("not-the-token")
        .await
        .map_err(cmd("typing"))?;
    click(c, "#token-save").await?;
    wait_texts(c, "#flash", "the refusal", |t| {
        t == ["The token was refused."]
    })
    .await?;
    find(c, "#login:not([hidden])").await?;
    let input = find(c, "#token-input").await?;
    input.send_keys(TOKEN).await.map_err(cmd("typing"))?;
    click(c, "#token-save").await?;
    wait_rows(c, "12 rows in Retry", |r| r.len() == 12).await?;
    wait_texts(c, "#mode", "the read-only mark", |t| t == ["read-only"]).await?;
    let buttons = c
        .execute(
            "return document.querySelectorAll('button.act, #run-all, #delete-all, button.pause-toggle').length",
            vec![],
        )
        .await
        .map_err(cmd("counting buttons"))?;
    if buttons != json!(0) {
        return Err(format!("a read-only page shows {buttons} action buttons"));
    }
    // The token stays in the tab's sessionStorage only.
    let stored = c
        .execute(
            "return [sessionStorage.getItem('retry-queue-token'), localStorage.length, document.cookie]",
            vec![],
        )
        .await
        .map_err(cmd("reading the storage"))?;
    if stored != json!([TOKEN, 0, ""]) {
        return Err(format!("the token is kept elsewhere: {stored}"));
    }
    Ok(())
}

/// Sizes the window so that the page itself (the screenshot) is `width` × `height`.
async fn viewport(c: &Client, width: u32, height: u32) -> Step {
    let chrome = c
        .execute(
            "return [window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight]",
            vec![],
        )
        .await
        .map_err(cmd("measuring the window"))?;
    let extra = |i: usize| chrome[i].as_u64().unwrap_or(0) as u32;
    c.set_window_size(width + extra(0), height + extra(1))
        .await
        .map_err(cmd("sizing the window"))
}

/// Takes a screenshot into `target/tmp/NAME`; `dashboard.png`, the README's, also into
/// `docs/` with `UPDATE_SCREENSHOT=1` (so that a test run leaves the work tree as it was).
async fn save_screenshot(c: &Client, name: &str) -> Step {
    let png = c.screenshot().await.map_err(cmd("taking a screenshot"))?;
    if !png.starts_with(b"\x89PNG") {
        return Err(format!("the screenshot {name} is no PNG"));
    }
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&tmp, &png).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    // The README shows these: the queue page with its chart, the Workers page, a task's page.
    let shown = [
        "dashboard.png",
        "dashboard-workers.png",
        "dashboard-task.png",
    ];
    if shown.contains(&name) && std::env::var_os("UPDATE_SCREENSHOT").is_some_and(|v| v == "1") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs")
            .join(name);
        std::fs::create_dir_all(docs.parent().unwrap()).map_err(|e| e.to_string())?;
        std::fs::write(&docs, &png).map_err(|e| format!("writing {}: {e}", docs.display()))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Who runs (issue 23, items 2, 3 and 9): the Workers page lists a live worker with the task it
// runs, the Schedulers page a scheduler's entry, and a queue with pending tasks and no worker
// says so, until a worker serving it starts.

/// A headless Chromium session (binary `chromium`) through the chromedriver on `driver_port`,
/// at the window size of the screenshots.
async fn chromium_session(chromium: &str, driver_port: u16) -> Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,800", "--hide-scrollbars", "--force-device-scale-factor=1"],
        }),
    );
    // The console's messages, for `console_errors`.
    capabilities.insert("goog:loggingPrefs".into(), json!({"browser": "ALL"}));
    // Chromium's first start on a busy 2-core machine can take a while.
    tokio::time::timeout(
        Duration::from_secs(60),
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{driver_port}")),
    )
    .await
    .expect("a browser session within 60 s")
    .expect("chromedriver opens a Chromium session")
}

/// chromedriver, a `retry-queue dash` on `url`, and a headless Chromium session; `None` (said
/// on stderr) without Chromium or chromedriver. The processes die with the value.
async fn browser(url: &str) -> Option<(Client, String, [Killed; 2])> {
    let (client, base, _driver, processes) = browser_with_driver(url).await?;
    Some((client, base, processes))
}

/// [`browser`], and the address of its chromedriver (whose log endpoint has the console's).
async fn browser_with_driver(url: &str) -> Option<(Client, String, String, [Killed; 2])> {
    let chromium = std::env::var("RETRY_TEST_CHROMIUM").unwrap_or_else(|_| CHROMIUM.to_owned());
    if !Path::new(&chromium).is_file() {
        skip(&format!("no Chromium at {chromium}"));
        return None;
    }
    let Some(driver) = chromedriver() else {
        skip("no chromedriver");
        return None;
    };
    let driver_port = free_port();
    let mut chromedriver = Killed(
        Command::new(driver)
            .arg(format!("--port={driver_port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts"),
    );
    wait_for_port(driver_port, "chromedriver", &mut chromedriver.0).await;
    let dash_port = free_port();
    let mut dash = Killed(
        Command::new(env!("CARGO_BIN_EXE_retry-queue"))
            .args(["--db", url, "dash", "--listen"])
            .arg(format!("127.0.0.1:{dash_port}"))
            .stdout(Stdio::null())
            .spawn()
            .expect("retry-queue dash starts"),
    );
    wait_for_port(dash_port, "retry-queue dash", &mut dash.0).await;
    let client = chromium_session(&chromium, driver_port).await;
    Some((
        client,
        format!("http://127.0.0.1:{dash_port}"),
        format!("http://127.0.0.1:{driver_port}"),
        [chromedriver, dash],
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sees_who_runs_and_a_queue_without_worker() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    // `exports`: three pending exports, no worker yet (the system clock: the dashboard reads it).
    let q = Queue::connect(&url).await.unwrap().named("exports");
    for n in 1..=3 {
        q.enqueue(Task::new("export", &n).task_id(format!("export-{n}")))
            .await
            .unwrap();
    }
    let Some((client, base, _processes)) = browser(&url).await else {
        return;
    };
    let outcome =
        tokio::time::timeout(Duration::from_secs(120), who_runs(&client, &base, &q)).await;
    let _ = client.close().await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => panic!("the browser steps took more than 2 minutes"),
    }
}

/// Whether the queue page's banner shows, read from the page.
async fn banner_shown(c: &Client, shown: bool, what: &str) -> Step {
    let css = if shown {
        "#no-worker:not([hidden])"
    } else {
        "#no-worker[hidden]"
    };
    wait_texts(c, css, what, |t| {
        t.len() == 1 && t[0].starts_with("No worker is running")
    })
    .await
    .map(drop)
}

async fn who_runs(c: &Client, base: &str, q: &Queue) -> Step {
    // No worker: the overview row and the queue page say so.
    c.goto(&format!("{base}/"))
        .await
        .map_err(cmd("opening the page"))?;
    viewport(c, 1280, 800).await?;
    wait_texts(
        c,
        "tr.queue-row[data-queue='exports'] .badge.no-worker",
        "the overview's flag",
        |t| t == ["no worker is running"],
    )
    .await?;
    click(c, "tr.queue-row[data-queue='exports'] a.queue-link").await?;
    banner_shown(c, true, "the banner without a worker").await?;
    c.goto(&format!("{base}/#/workers"))
        .await
        .map_err(cmd("opening the Workers page"))?;
    wait_texts(c, "#empty", "no worker listed", |t| {
        t == ["No worker is running."]
    })
    .await?;

    // A worker serving the queue, running one export until told to stop, and a scheduler.
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let held = release.clone();
    let worker = Worker::new(q.clone())
        .concurrency(1)
        .prefetch(0)
        .poll_interval(Duration::from_millis(50))
        .heartbeat_interval(Duration::from_millis(200))
        .shutdown_timeout(Duration::from_millis(100))
        .handle("export", move |_task| {
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
    let scheduler = retry_runtime::durable::Scheduler::new(q.clone())
        .heartbeat_interval(Duration::from_millis(200))
        .every(Duration::from_secs(3600), || Task::new("digest", &0));
    let (stop_scheduler, scheduler_stopped) = tokio::sync::oneshot::channel::<()>();
    let scheduling = tokio::spawn(scheduler.run_until(async {
        scheduler_stopped.await.ok();
    }));

    // The Workers page (reached by its nav link) lists it with the task it holds.
    c.goto(&format!("{base}/#/"))
        .await
        .map_err(cmd("back to the overview"))?;
    click(c, "#nav-workers").await?;
    wait_texts(c, "tr.held-task td.kind", "the export it runs", |t| {
        t == ["export"]
    })
    .await?;
    wait_texts(c, "tr.held-task td.id", "export-1 held", |t| {
        t == ["export-1"]
    })
    .await?;
    wait_texts(c, "tr.worker td.queues a", "its queue", |t| {
        t == ["exports"]
    })
    .await?;
    // Alone on its queue, it leads it: the queue carries the leader's badge, the row says so.
    wait_texts(
        c,
        "tr.worker.leader[data-leader-of='exports'] td.queues .badge.leader",
        "it leads its queue",
        |t| t == ["leader"],
    )
    .await?;
    wait_texts(c, "tr.worker td.busy", "one slot of one busy", |t| {
        t == ["1/1"]
    })
    .await?;
    wait_texts(c, "tr.worker td.pid", "this process", |t| {
        t == [std::process::id().to_string()]
    })
    .await?;
    save_screenshot(c, "dashboard-workers.png").await?;

    // The Schedulers page lists the entry with its last task.
    click(c, "#nav-schedulers").await?;
    wait_texts(
        c,
        "tr.entry[data-queue='exports'] td.spec",
        "the entry's spec",
        |t| t == ["every:3600000ms"],
    )
    .await?;
    wait_texts(
        c,
        "tr.entry[data-queue='exports'] td.kind",
        "the entry's kind",
        |t| t == ["digest"],
    )
    .await?;
    wait_texts(
        c,
        "tr.entry[data-queue='exports'] td.last-task",
        "the task it enqueued",
        |t| t.len() == 1 && t[0].starts_with("periodic:digest:every:3600000ms:"),
    )
    .await?;
    save_screenshot(c, "dashboard-schedulers.png").await?;

    // With the worker alive, the queue page has no banner, the overview no flag.
    c.goto(&format!("{base}/#/q/exports/pending"))
        .await
        .map_err(cmd("opening the queue"))?;
    banner_shown(c, false, "no banner with a worker").await?;
    c.goto(&format!("{base}/#/"))
        .await
        .map_err(cmd("back to the overview"))?;
    find(c, "tr.queue-row[data-queue='exports']").await?;
    wait_texts(
        c,
        "tr.queue-row[data-queue='exports'] .badge.no-worker",
        "no flag with a worker",
        |t| t.is_empty(),
    )
    .await?;

    // Stopped gracefully: the worker leaves at once, and the banner is back.
    stop.send(())
        .map_err(|()| "the worker had stopped".to_owned())?;
    stop_scheduler
        .send(())
        .map_err(|()| "the scheduler had stopped".to_owned())?;
    running
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    scheduling
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    drop(release);
    c.goto(&format!("{base}/#/q/exports/pending"))
        .await
        .map_err(cmd("opening the queue again"))?;
    banner_shown(c, true, "the banner once the worker stopped").await?;
    c.goto(&format!("{base}/#/schedulers"))
        .await
        .map_err(cmd("opening the Schedulers page"))?;
    wait_texts(c, "#empty", "no scheduler listed", |t| {
        t == ["No scheduler is running."]
    })
    .await?;
    Ok(())
}

// ---- Odd ids, bidirectional text, bad links and the refresh chain. ----

/// An id that a browser would resolve away as a path segment, and one with U+202E (RIGHT-TO-LEFT
/// OVERRIDE), which would show "evil\u{202E}gpj.exe" as "evilexe.jpg".
const RLO_ID: &str = "evil\u{202E}gpj.exe";
const RLO_ERR: &str = "card \u{202E}deripxe";
const RLO_QUEUE: &str = "ops\u{2067}x";

/// Three archived tasks in `default` (ids `..`, `.` and [`RLO_ID`], kind `ch\u{202D}arge`,
/// `last_err` from [`RLO_ERR`]) and a queue [`RLO_QUEUE`] with one pending task.
async fn seed_odd(url: &str) {
    let q = Queue::connect(url).await.expect("SQLite opens a new file");
    let worker =
        Worker::new(q.clone())
            .concurrency(8)
            .handle("ch\u{202D}arge", |task| async move {
                let why: String = task.payload()?;
                Err(BoxError::from(why))
            });
    for id in ["..", ".", RLO_ID] {
        q.enqueue(
            Task::new("ch\u{202D}arge", &RLO_ERR)
                .task_id(id)
                .max_retry(0),
        )
        .await
        .unwrap();
    }
    assert_eq!(worker.run_due().await.unwrap(), 3);
    assert_eq!(q.inspector().count(TaskState::Archived).await.unwrap(), 3);
    q.clone()
        .named(RLO_QUEUE)
        .enqueue(Task::new("report", &1))
        .await
        .unwrap();
    q.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_ids_bidi_text_bad_links_and_the_refresh_chain_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    seed_odd(&url).await;
    let Some((client, base, _processes)) = browser(&url).await else {
        return;
    };
    let outcome = tokio::time::timeout(Duration::from_secs(120), async {
        odd_ids_and_bidi_text(&client, &base).await?;
        bad_links(&client, &base).await?;
        refresh_chain(&client, &base).await
    })
    .await;
    let _ = client.close().await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => panic!("the browser steps took more than 2 minutes"),
    }
    let q = Queue::connect(&url).await.unwrap();
    assert_eq!(
        q.inspector().get("..").await.unwrap().unwrap().state,
        TaskState::Pending
    );
    assert!(q.inspector().get(".").await.unwrap().is_none());
    assert_eq!(
        q.inspector().get(RLO_ID).await.unwrap().unwrap().state,
        TaskState::Pending
    );
}

/// Whether any bidirectional control is in the text of the page's body.
const RAW_BIDI: &str = "return /[\\u061C\\u200E\\u200F\\u202A-\\u202E\\u2066-\\u2069]/.test(document.body.textContent) \
                        || Array.from(document.querySelectorAll('[title]')).some(e => /[\\u202A-\\u202E\\u2066-\\u2069]/.test(e.title))";

async fn no_raw_bidi(c: &Client, what: &str) -> Step {
    let raw = c.execute(RAW_BIDI, vec![]).await.map_err(cmd(what))?;
    match raw == json!(false) {
        true => Ok(()),
        false => Err(format!("{what}: a raw bidirectional control is shown")),
    }
}

async fn odd_ids_and_bidi_text(c: &Client, base: &str) -> Step {
    c.goto(&format!("{base}/"))
        .await
        .map_err(cmd("opening the page"))?;
    // The queue's name: its U+2067 shown as a marked escape.
    wait_texts(c, "a.queue-link", "the odd queue's name, escaped", |t| {
        t.iter().any(|name| name == "ops\\u{2067}x")
    })
    .await?;
    find(c, "a.queue-link span.bidi").await?;
    no_raw_bidi(c, "the overview").await?;

    c.goto(&format!("{base}/#/q/default/archived"))
        .await
        .map_err(cmd("opening Archived"))?;
    wait_rows(c, "the three odd ids", |r| r.len() == 3).await?;
    let mut ids = row_ids(c).await?;
    ids.sort();
    if ids != [".", "..", RLO_ID] {
        return Err(format!("rows {ids:?}"));
    }
    let shown = wait_texts(c, "#tasks td.id", "ids shown as text", |t| t.len() == 3).await?;
    if !shown.iter().any(|t| t == "evil\\u{202E}gpj.exe") || !shown.iter().any(|t| t == "..") {
        return Err(format!("ids shown as {shown:?}"));
    }
    wait_texts(c, "#tasks td.kind", "kinds escaped", |t| {
        t.iter().all(|k| k == "ch\\u{202D}arge")
    })
    .await?;
    wait_texts(c, "#tasks td.last-err", "errors escaped", |t| {
        t.len() == 3 && t.iter().all(|e| e.starts_with("card \\u{202E}deripxe"))
    })
    .await?;
    // Details: the payload and the whole error, escaped too.
    click(c, "button.expand[data-id='..']").await?;
    wait_texts(
        c,
        "tr.payload-row[data-id='..']:not([hidden]) pre.payload",
        "the payload, escaped",
        |t| t == ["\"card \\u{202E}deripxe\""],
    )
    .await?;
    no_raw_bidi(c, "the Archived tab").await?;

    // Run on "..", Delete on ".", Run on the RLO id: each acts on its own task.
    click(c, "button.act[data-action='run'][data-id='..']").await?;
    wait_rows(c, "'..' ran (left Archived)", |r| {
        r.len() == 2 && !r.iter().any(|id| id == "..")
    })
    .await?;
    wait_texts(c, "#flash", "the run's message", |t| {
        t == ["Task ..: run done."]
    })
    .await?;
    click(c, "button.act[data-action='delete'][data-id='.']").await?;
    wait_rows(c, "'.' deleted", |r| r == [RLO_ID]).await?;
    click(
        c,
        &format!("button.act[data-action='run'][data-id='{RLO_ID}']"),
    )
    .await?;
    wait_rows(c, "the RLO id ran", |r| r.is_empty()).await?;
    wait_texts(c, "#flash", "its message, escaped", |t| {
        t == ["Task evil\\u{202E}gpj.exe: run done."]
    })
    .await?;
    no_raw_bidi(c, "the flash").await
}

/// Installs a capture of script errors and unhandled rejections on the current page.
const CAPTURE_ERRORS: &str = "window.__errors = []; \
    window.addEventListener('error', (e) => window.__errors.push(String(e.message))); \
    window.addEventListener('unhandledrejection', (e) => window.__errors.push(String(e.reason)));";

async fn bad_links(c: &Client, base: &str) -> Step {
    // Opened directly: the overview, and a message.
    c.goto(&format!("{base}/#/q/%E0%A4%A"))
        .await
        .map_err(cmd("opening a malformed link"))?;
    find(c, "table#queues").await?;
    wait_texts(c, "#flash", "the bad-link message", |t| {
        t.len() == 1 && t[0].starts_with("This link is malformed")
    })
    .await?;
    // Reached by a hash change (a link, the back button), with errors captured.
    c.goto(&format!("{base}/#/q/default/pending"))
        .await
        .map_err(cmd("opening Pending"))?;
    find(c, "#tasks[data-state='pending']").await?;
    c.execute(CAPTURE_ERRORS, vec![])
        .await
        .map_err(cmd("capturing errors"))?;
    for bad in ["#/q/%E0%A4%A", "#/q/%/retry", "#/%ZZ"] {
        c.execute(
            "document.getElementById('main').replaceChildren(); location.hash = arguments[0];",
            vec![json!(bad)],
        )
        .await
        .map_err(cmd("following a malformed link"))?;
        find(c, "table#queues").await?;
        wait_texts(c, "#flash", "the bad-link message", |t| {
            t.len() == 1 && t[0].starts_with("This link is malformed")
        })
        .await?;
    }
    let errors = c
        .execute("return window.__errors", vec![])
        .await
        .map_err(cmd("reading the errors"))?;
    match errors == json!([]) {
        true => Ok(()),
        false => Err(format!("script errors on malformed links: {errors}")),
    }
}

/// Wraps `fetch`: each call logged, answered 400 ms late (longer than the refresh period, so
/// that a timer-driven refresh would overlap the one before), with the most in flight at once.
const COUNT_FETCHES: &str = "const log = window.__fetches = { urls: [], inFlight: 0, most: 0 }; \
    const original = window.fetch.bind(window); \
    window.fetch = (url, init) => { \
      log.urls.push(String(url)); log.inFlight++; log.most = Math.max(log.most, log.inFlight); \
      return new Promise((r) => setTimeout(r, 400)).then(() => original(url, init)) \
        .finally(() => { log.inFlight--; }); \
    };";

async fn fetches(c: &Client) -> Result<(Vec<String>, u64, u64), String> {
    let log = c
        .execute("return window.__fetches", vec![])
        .await
        .map_err(cmd("reading the fetch log"))?;
    let urls = serde_json::from_value(log["urls"].clone()).unwrap_or_default();
    Ok((
        urls,
        log["inFlight"].as_u64().unwrap_or(99),
        log["most"].as_u64().unwrap_or(99),
    ))
}

/// Sets `document.hidden` as a hidden or shown tab has it, and tells the page.
async fn set_hidden(c: &Client, hidden: bool) -> Step {
    c.execute(
        "Object.defineProperty(document, 'hidden', { configurable: true, get: () => arguments[0] }); \
         Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => arguments[0] ? 'hidden' : 'visible' }); \
         document.dispatchEvent(new Event('visibilitychange'));",
        vec![json!(hidden)],
    )
    .await
    .map(|_| ())
    .map_err(cmd("changing the visibility"))
}

async fn refresh_chain(c: &Client, base: &str) -> Step {
    // A refresh every 200 ms (the page's knob for tests), on the Pending tab.
    c.goto(&format!("{base}/#/q/default/pending"))
        .await
        .map_err(cmd("opening Pending"))?;
    c.execute(
        "sessionStorage.setItem('retry-queue-refresh-ms', '200'); location.reload();",
        vec![],
    )
    .await
    .map_err(cmd("setting the refresh period"))?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    find(c, "#tasks[data-state='pending']").await?;
    c.execute(COUNT_FETCHES, vec![])
        .await
        .map_err(cmd("counting fetches"))?;
    // Refreshes go on, one at a time, one request each: the tasks (with the queue's stats).
    let start = Instant::now();
    let mut seen = Vec::new();
    while start.elapsed() < PATIENCE && seen.len() < 4 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        seen = fetches(c).await?.0;
    }
    // A navigation while a refresh is under way waits for it.
    c.execute("location.hash = '#/q/default/archived';", vec![])
        .await
        .map_err(cmd("navigating"))?;
    find(c, "#tasks[data-state='archived']").await?;
    c.execute("location.hash = '#/q/default/pending';", vec![])
        .await
        .map_err(cmd("navigating"))?;
    find(c, "#tasks[data-state='pending']").await?;
    let (urls, _, most) = fetches(c).await?;
    if urls.len() < 4 {
        return Err(format!("fewer than 4 refreshes: {urls:?}"));
    }
    if most != 1 {
        return Err(format!("{most} requests were in flight at once: {urls:?}"));
    }
    let one_each = |u: &String| {
        u.ends_with("/api/queues/default/tasks?state=pending&size=20&kinds=1&page=1")
            || u.ends_with("/api/queues/default/tasks?state=archived&size=20&kinds=1&page=1")
    };
    if !urls.iter().all(one_each) {
        return Err(format!("a refresh asked for more than its tasks: {urls:?}"));
    }
    // Hidden: no refresh at all; shown: one at once.
    set_hidden(c, true).await?;
    let start = Instant::now();
    while fetches(c).await?.1 > 0 && start.elapsed() < PATIENCE {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = fetches(c).await?.0.len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let hidden = fetches(c).await?.0.len();
    if hidden != before {
        return Err(format!(
            "{} requests while the tab was hidden",
            hidden - before
        ));
    }
    set_hidden(c, false).await?;
    let shown = fetches(c).await?.0.len();
    if shown != hidden + 1 {
        return Err(format!(
            "showing the tab made {} requests at once, not 1",
            shown - hidden
        ));
    }
    let (_, _, most) = fetches(c).await?;
    match most {
        1 => Ok(()),
        most => Err(format!("{most} requests were in flight at once")),
    }
}

// ---- Issue 23, items 4–6 and 9: find, selections, the task page, the flags. ----

/// The trace context `pay-1` carries (a W3C example): the task page shows its trace id.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Seeds a SQLite file for [`an_operator_finds_selects_and_opens_tasks_in_a_real_browser`]; the
/// queue's clock starts two hours ago (the dashboard reads the system clock):
///
/// - active: `stuck-1`, its 30 s lease long expired (no worker runs); `live-1`, leased for a week;
/// - retry: `pay-1` … `pay-4` (kind `charge`, failed twice; `pay-1` and `pay-2` "gateway
///   timeout", `pay-3` and `pay-4` "card declined"; `pay-1`'s payload holds [`HOSTILE`]), due
///   in an hour; `mail-1` (kind `send`, "smtp refused"); `late-1` (kind `charge`, "gateway
///   timeout"), due 59 minutes ago: overdue;
/// - pending: `odd/id 1%` (kind `report`).
///
/// `pay-1` carries the trace context [`TRACEPARENT`].
async fn seed_find(url: &str) {
    let clock = ManualClock::new(SystemTime::now() - Duration::from_secs(2 * 3600));
    let q = Queue::connect(url)
        .await
        .expect("SQLite opens a new file")
        .with_clock(clock.clone());
    let w = Worker::new(q.clone())
        .concurrency(16)
        .retry_delay(|n, _err, task| {
            if task.id() == "late-1" {
                Duration::from_secs(60)
            } else {
                Duration::from_secs(3600 * (u64::from(n) + 1))
            }
        })
        .handle("charge", |task| async move {
            let order: Value = task.payload()?;
            Err(BoxError::from(
                order["fail"].as_str().unwrap_or("?").to_owned(),
            ))
        })
        .handle("send", |_task| async {
            Err::<(), BoxError>("smtp refused".into())
        });
    for (id, lease) in [("stuck-1", 30), ("live-1", 7 * 86_400)] {
        q.enqueue(Task::new("report", &id).task_id(id))
            .await
            .unwrap();
        let claimed = retry_runtime::durable::protocol::claim(&q, 1, Duration::from_secs(lease))
            .await
            .unwrap();
        assert_eq!(claimed[0].id(), id);
    }
    let charge = |id: &str, n: u64, fail: &str| {
        let note = if n == 1 { HOSTILE } else { "" };
        Task::new("charge", &json!({"order": n, "fail": fail, "note": note})).task_id(id)
    };
    for (n, fail) in [
        (1, "gateway timeout"),
        (2, "gateway timeout"),
        (3, "card declined"),
        (4, "card declined"),
    ] {
        let mut task = charge(&format!("pay-{n}"), n, fail);
        if n == 1 {
            task = task.trace_parent(TRACEPARENT);
        }
        q.enqueue(task).await.unwrap();
    }
    q.enqueue(Task::new("send", &"ada@example.com").task_id("mail-1"))
        .await
        .unwrap();
    assert_eq!(w.run_due().await.unwrap(), 5);
    clock.advance(Duration::from_secs(3600));
    assert_eq!(w.run_due().await.unwrap(), 5);
    q.enqueue(charge("late-1", 9, "gateway timeout"))
        .await
        .unwrap();
    assert_eq!(w.run_due().await.unwrap(), 1);
    q.enqueue(Task::new("report", &"odd").task_id("odd/id 1%"))
        .await
        .unwrap();
    assert_eq!(q.inspector().count(TaskState::Retry).await.unwrap(), 6);
    assert_eq!(q.inspector().count(TaskState::Active).await.unwrap(), 2);
    q.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_finds_selects_and_opens_tasks_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    seed_find(&url).await;
    let Some((client, base, _processes)) = browser(&url).await else {
        return;
    };
    let outcome =
        tokio::time::timeout(Duration::from_secs(120), find_select_open(&client, &base)).await;
    let _ = client.close().await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => panic!("the browser steps took more than 2 minutes"),
    }

    // What the browser did is in the database.
    let q = Queue::connect(&url).await.unwrap();
    let state = |id: &'static str| {
        let q = q.clone();
        async move { q.inspector().get(id).await.unwrap().map(|t| t.state) }
    };
    assert_eq!(state("pay-3").await, Some(TaskState::Pending));
    assert_eq!(state("pay-4").await, Some(TaskState::Pending));
    // Run, then archived by hand on its page.
    let pay_1 = q.inspector().get("pay-1").await.unwrap().unwrap();
    assert_eq!(
        (pay_1.state, pay_1.archive_reason),
        (TaskState::Archived, Some(ArchiveReason::Operator))
    );
    assert_eq!(
        state("mail-1").await,
        None,
        "deleted after the confirmation"
    );
    assert_eq!(state("pay-2").await, Some(TaskState::Retry));
    assert_eq!(
        state("live-1").await,
        Some(TaskState::Active),
        "canceled: its worker (none runs here) would stop it"
    );
}

/// Sets the search box to `text` and submits it.
async fn search_for(c: &Client, text: &str) -> Step {
    c.execute(
        "const box = document.getElementById('search'); box.value = arguments[0]; \
         document.getElementById('search-go').click()",
        vec![json!(text)],
    )
    .await
    .map(drop)
    .map_err(cmd("searching"))
}

async fn find_select_open(c: &Client, base: &str) -> Step {
    c.goto(&format!("{base}/#/q/default/retry"))
        .await
        .map_err(cmd("opening the page"))?;
    viewport(c, 1280, 800).await?;
    wait_rows(c, "6 rows in Retry", |r| r.len() == 6).await?;

    // The overdue retry is flagged, not shown as "… ago"; the others are due in an hour.
    wait_texts(
        c,
        "tr.task[data-id='late-1'] td.next .flag.overdue",
        "late-1 overdue",
        |t| t.len() == 1 && t[0].starts_with("overdue by ") && t[0].ends_with(" min"),
    )
    .await?;
    wait_texts(
        c,
        "tr.task[data-id='pay-1'] td.next .rel",
        "pay-1 due later",
        |t| t.len() == 1 && t[0].starts_with("in "),
    )
    .await?;

    // The search box: a text in the last error, any case.
    search_for(c, "DECLINED").await?;
    wait_rows(c, "the declined charges", |r| r == ["pay-3", "pay-4"]).await?;
    wait_texts(c, "#search-info", "what was searched", |t| {
        t == ["Searched 6 retry tasks."]
    })
    .await?;
    // The kind selector (with the search box emptied: the two filters combine).
    c.execute(
        "document.getElementById('search').value = ''; \
         const s = document.getElementById('kind-filter'); s.value = 'send'; \
         s.dispatchEvent(new Event('change'))",
        vec![],
    )
    .await
    .map_err(cmd("choosing a kind"))?;
    wait_rows(c, "the send task", |r| r == ["mail-1"]).await?;
    let options = wait_texts(c, "#kind-filter option", "the kinds", |t| t.len() == 3).await?;
    if options != ["All kinds", "charge", "send"] {
        return Err(format!("kind options: {options:?}"));
    }
    click(c, "#search-clear").await?;
    wait_rows(c, "6 rows again", |r| r.len() == 6).await?;

    // Select two rows and run them.
    click(c, "input.select-task[data-id='pay-3']").await?;
    click(c, "input.select-task[data-id='pay-4']").await?;
    wait_texts(c, "#selected-count", "two selected", |t| {
        t == ["2 selected"]
    })
    .await?;
    save_screenshot(c, "dashboard-selection.png").await?;
    click(c, "#batch-run").await?;
    wait_rows(c, "pay-3 and pay-4 gone from Retry", |r| {
        r.len() == 4 && !r.iter().any(|id| id == "pay-3" || id == "pay-4")
    })
    .await?;
    wait_texts(c, "#flash", "the batch's outcome", |t| {
        t == ["Run: 2 done."]
    })
    .await?;
    wait_texts(c, "#selection-bar:not([hidden])", "the bar gone", |t| {
        t.is_empty()
    })
    .await?;

    // Delete asks first: Cancel keeps the task, Yes deletes it.
    click(c, "input.select-task[data-id='mail-1']").await?;
    click(c, "#batch-delete").await?;
    wait_texts(c, "#confirm-text", "a question", |t| {
        t == ["Delete 1 selected retry tasks of default?"]
    })
    .await?;
    click(c, "#confirm-no").await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    wait_rows(c, "mail-1 kept", |r| r.iter().any(|id| id == "mail-1")).await?;
    click(c, "#batch-delete").await?;
    click(c, "#confirm-yes").await?;
    wait_rows(c, "mail-1 deleted", |r| {
        r.len() == 3 && !r.iter().any(|id| id == "mail-1")
    })
    .await?;

    // The task page: payload as text, every failure with its time, the actions of its state.
    click(c, "tr.task[data-id='pay-1'] a.task-link").await?;
    wait_texts(c, "#task-id", "the task's id", |t| t == ["pay-1"]).await?;
    wait_texts(c, "#task-payload", "the payload, pretty and as text", |t| {
        t.len() == 1 && t[0].contains("\n  \"order\": 1\n") && t[0].contains(HOSTILE)
    })
    .await?;
    wait_texts(c, "#task-last-err", "the last error", |t| {
        t == ["gateway timeout"]
    })
    .await?;
    wait_texts(c, "#crumbs", "the way back", |t| {
        t == [" / default / Retry / pay-1"]
    })
    .await?;
    wait_texts(c, "#task-fields .field-kind", "the kind", |t| {
        t == ["charge"]
    })
    .await?;
    wait_texts(c, "#task-fields .field-trace", "the trace id", |t| {
        t == ["4bf92f3577b34da6a3ce929d0e0e4736"]
    })
    .await?;
    let failures = wait_texts(c, "#failures tr.failure", "two failures", |t| t.len() == 2).await?;
    if !failures
        .iter()
        .all(|f| f.contains("gateway timeout") && f.contains("UTC"))
    {
        return Err(format!(
            "failures without their error or time: {failures:?}"
        ));
    }
    let made = c
        .execute(
            "return document.querySelectorAll('main script, main img').length",
            vec![],
        )
        .await
        .map_err(cmd("counting elements"))?;
    if made != json!(0) {
        return Err(format!("the payload made elements: {made}"));
    }
    no_alert(c.get_alert_text().await)?;
    save_screenshot(c, "dashboard-task.png").await?;
    wait_texts(
        c,
        "#task-archive-reason",
        "no reason outside the archive",
        |t| t.is_empty(),
    )
    .await?;
    click(c, "#task-run").await?;
    wait_texts(c, "#task-state", "pay-1 pending", |t| t == ["pending"]).await?;
    // Archived by hand: the page names the reason.
    click(c, "#task-archive").await?;
    wait_texts(c, "#task-state", "pay-1 archived", |t| t == ["archived"]).await?;
    wait_texts(c, "#task-archive-reason", "the archive reason", |t| {
        t == ["operator"]
    })
    .await?;

    // Ids travel percent-encoded in the fragment; an unknown one says so.
    c.goto(&format!("{base}/#/q/default/pending"))
        .await
        .map_err(cmd("opening Pending"))?;
    click(c, "tr.task[data-id='odd/id 1%'] a.task-link").await?;
    wait_texts(c, "#task-id", "the odd id", |t| t == ["odd/id 1%"]).await?;
    wait_texts(
        c,
        "#task-fields .field-trace",
        "no trace row without a trace",
        |t| t.is_empty(),
    )
    .await?;
    c.goto(&format!("{base}/#/q/default/task/nope"))
        .await
        .map_err(cmd("opening an unknown task"))?;
    wait_texts(c, "#task-missing", "no such task", |t| {
        t.len() == 1 && t[0].starts_with("No task nope in queue default")
    })
    .await?;

    // The Active tab: an expired lease is flagged; Cancel on a running task.
    c.goto(&format!("{base}/#/q/default/active"))
        .await
        .map_err(cmd("opening Active"))?;
    wait_rows(c, "2 active", |r| r.len() == 2).await?;
    wait_texts(
        c,
        "tr.task[data-id='stuck-1'] .flag.lease-expired",
        "stuck-1 flagged",
        |t| t == ["lease expired — the recoverer will retry it"],
    )
    .await?;
    wait_texts(
        c,
        "tr.task[data-id='live-1'] .flag",
        "live-1 not flagged",
        |t| t.is_empty(),
    )
    .await?;
    click(c, "tr.task[data-id='live-1'] button[data-action='cancel']").await?;
    wait_texts(c, "#flash", "the cancel", |t| {
        t == ["Task live-1: cancel done."]
    })
    .await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// At production size (issue 23, item 10): the pages and actions once more, on a database of
// `RETRY_BROWSER_TASKS` tasks (1 000 000 by default) seeded through `enqueue_many`, with a day of
// attempts in its history, a live worker holding a task and a live scheduler. The first paint of
// a queue page with its chart is measured and reported on stderr, not asserted.

/// Seeds `total` tasks into `url`: all but 600 scheduled a month ahead (kinds report, email and
/// charge in turn, ids `bulk-0000000`…), through `enqueue_many` in batches of 10 000; then, an
/// hour apart over the last day, 20 successes and 5 failures an hour. Returns the seeding time.
async fn seed_at_scale(url: &str, total: usize) -> Duration {
    const KINDS: [&str; 3] = ["report", "email", "charge"];
    let start = Instant::now();
    let q = Queue::connect(url).await.expect("SQLite opens a new file");
    let bulk = total.saturating_sub(600);
    let month = Duration::from_secs(30 * 86_400);
    let mut n = 0;
    while n < bulk {
        let batch: Vec<Task> = (n..(n + 10_000).min(bulk))
            .map(|i| {
                Task::new(KINDS[i % 3], &json!({"n": i}))
                    .task_id(format!("bulk-{i:07}"))
                    .process_in(month)
            })
            .collect();
        n += batch.len();
        q.enqueue_many(batch).await.expect("enqueue_many");
    }
    let clock = ManualClock::new(SystemTime::now() - Duration::from_secs(23 * 3600));
    let past = q.clone().with_clock(clock.clone());
    let worker = Worker::new(past.clone())
        .concurrency(16)
        .retry_delay(|_, _, _| Duration::from_secs(7 * 86_400))
        .handle("ok", |_task| async { Ok::<(), BoxError>(()) })
        .handle("flaky", |task| async move {
            let n: u64 = task.payload()?;
            Err(BoxError::from(format!(
                "upstream {} unavailable (503)",
                n % 4
            )))
        });
    for hour in 0..24u64 {
        let tasks = (0..25u64).map(|i| {
            let n = hour * 25 + i;
            if i < 20 {
                Task::new("ok", &n)
            } else {
                Task::new("flaky", &n).task_id(format!("flaky-{n:03}"))
            }
        });
        past.enqueue_many(tasks).await.expect("enqueue_many");
        while worker.run_due().await.expect("run_due") > 0 {}
        clock.advance(Duration::from_secs(3600));
    }
    q.close().await;
    start.elapsed()
}

/// Straight to stderr (past the harness's capture): the figures of the run.
fn report(line: &str) {
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{line}\n").as_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_at_a_million_tasks_in_a_real_browser() {
    let total: usize = std::env::var("RETRY_BROWSER_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    if !Path::new(&std::env::var("RETRY_TEST_CHROMIUM").unwrap_or_else(|_| CHROMIUM.to_owned()))
        .is_file()
        || chromedriver().is_none()
    {
        return skip("no Chromium or no chromedriver");
    }
    let seeded = seed_at_scale(&url, total).await;
    report(&format!(
        "dashboard at scale: seeded {total} tasks in {:.1} s",
        seeded.as_secs_f64()
    ));

    // A live worker holding one task (it serves only that kind), and a live scheduler.
    let q = Queue::connect(&url).await.unwrap();
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let held = release.clone();
    let worker = Worker::new(q.clone())
        .concurrency(1)
        .poll_interval(Duration::from_millis(50))
        .heartbeat_interval(Duration::from_millis(200))
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
    q.enqueue(Task::new("slow", &0).task_id("held-1"))
        .await
        .unwrap();
    let scheduler = retry_runtime::durable::Scheduler::new(q.clone())
        .heartbeat_interval(Duration::from_millis(200))
        .every(Duration::from_secs(3600), || Task::new("digest", &0));
    let (stop_scheduler, scheduler_stopped) = tokio::sync::oneshot::channel::<()>();
    let scheduling = tokio::spawn(scheduler.run_until(async {
        scheduler_stopped.await.ok();
    }));

    let Some((client, base, _processes)) = browser(&url).await else {
        return;
    };
    let outcome =
        tokio::time::timeout(Duration::from_secs(180), at_scale(&client, &base, total)).await;
    let _ = client.close().await;
    release.notify_waiters();
    let _ = stop.send(());
    let _ = stop_scheduler.send(());
    running.await.unwrap().expect("the worker");
    scheduling.await.unwrap().expect("the scheduler");
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => panic!("the browser steps took more than 3 minutes"),
    }
    // What the browser did is in the database: two tasks run, one canceled.
    let inspector = q.inspector();
    for id in ["bulk-0000000", "bulk-0000001"] {
        let state = inspector.get(id).await.unwrap().unwrap().state;
        assert!(
            matches!(
                state,
                TaskState::Pending | TaskState::Active | TaskState::Completed
            ),
            "{id}: {state:?}"
        );
    }
    let canceled = inspector.get("held-1").await.unwrap().unwrap();
    assert_eq!(canceled.state, TaskState::Archived);
    assert!(
        canceled
            .last_err
            .is_some_and(|e| e.ends_with("(canceled by operator)"))
    );
}

async fn at_scale(c: &Client, base: &str, total: usize) -> Step {
    // First paint: from the navigation to the chart's 24 bars and the tab's 20 rows on screen.
    let start = Instant::now();
    c.goto(&format!("{base}/#/q/default/scheduled"))
        .await
        .map_err(cmd("opening the queue page"))?;
    viewport(c, 1280, 800).await?;
    wait_texts(c, "#history-chart title", "the chart", |t| !t.is_empty()).await?;
    let bars = c
        .execute(
            "return document.querySelectorAll('#history-chart g.bucket').length",
            vec![],
        )
        .await
        .map_err(cmd("counting the bars"))?;
    wait_rows(c, "a page of scheduled tasks", |r| r.len() == 20).await?;
    report(&format!(
        "dashboard at scale: first paint of the queue page with its chart on {total} tasks: \
         {} ms (headless Chromium, {bars} bars)",
        start.elapsed().as_millis()
    ));
    if bars != json!(24) {
        return Err(format!("24 hourly bars, got {bars}"));
    }
    // A day of attempts: 480 successes and 120 failures (the flaky ones fail once).
    wait_texts(c, "#history-processed", "the day's attempts", |t| {
        t == ["600"]
    })
    .await?;
    wait_texts(c, "#history-failed", "the day's failures", |t| t == ["120"]).await?;
    click(c, "#history-ranges button[data-range='7d']").await?;
    wait_texts(c, "#history-caption", "the week", |t| {
        t.len() == 1 && t[0].ends_with("in the last 7 days (UTC).")
    })
    .await?;
    wait_texts(
        c,
        "#tabs a[data-state='scheduled'] .count",
        "the count",
        |t| t == [(total - 600).to_string()],
    )
    .await?;

    // Find: a text within the searched window, then a kind.
    search_for(c, "bulk-0000042").await?;
    wait_rows(c, "the one task found", |r| r == ["bulk-0000042"]).await?;
    wait_texts(c, "#search-info", "what was searched", |t| {
        t.len() == 1 && t[0].starts_with("Searched 10000 scheduled tasks")
    })
    .await?;
    click(c, "#search-clear").await?;
    wait_rows(c, "the first page again", |r| r.len() == 20).await?;
    c.execute(
        "const s = document.getElementById('kind-filter'); s.value = 'email'; \
         s.dispatchEvent(new Event('change'))",
        vec![],
    )
    .await
    .map_err(cmd("choosing a kind"))?;
    wait_texts(c, "#tasks tr.task td.kind", "a page of emails", |t| {
        t.len() == 20 && t.iter().all(|k| k == "email")
    })
    .await?;
    click(c, "#search-clear").await?;

    // A selection of two, run.
    wait_rows(c, "the first page", |r| r.len() == 20).await?;
    click(c, "input.select-task[data-id='bulk-0000000']").await?;
    click(c, "input.select-task[data-id='bulk-0000001']").await?;
    click(c, "#batch-run").await?;
    wait_rows(c, "the two run tasks left Scheduled", |r| {
        r.len() == 20
            && !r
                .iter()
                .any(|id| id == "bulk-0000000" || id == "bulk-0000001")
    })
    .await?;

    // One task's page.
    click(c, "tr.task[data-id='bulk-0000002'] a.task-link").await?;
    wait_texts(c, "#task-id", "the task page", |t| t == ["bulk-0000002"]).await?;
    wait_texts(c, "#task-payload", "its payload", |t| {
        t.len() == 1 && t[0].contains("\"n\": 2")
    })
    .await?;

    // Who runs, and a cancel of the running task.
    c.goto(&format!("{base}/#/workers"))
        .await
        .map_err(cmd("opening the Workers page"))?;
    wait_texts(c, "tr.held-task td.id", "the held task", |t| {
        t == ["held-1"]
    })
    .await?;
    c.goto(&format!("{base}/#/schedulers"))
        .await
        .map_err(cmd("opening the Schedulers page"))?;
    wait_texts(c, "tr.entry td.kind", "the scheduler's entry", |t| {
        t == ["digest"]
    })
    .await?;
    c.goto(&format!("{base}/#/q/default/active"))
        .await
        .map_err(cmd("opening the Active tab"))?;
    wait_rows(c, "the held task", |r| r == ["held-1"]).await?;
    click(c, "tr.task[data-id='held-1'] button[data-action='cancel']").await?;
    wait_rows(c, "no active task", |r| r.is_empty()).await?;
    Ok(())
}

/// A queue named `..` with one pending task, and a queue `late` whose only work is two retry
/// tasks overdue by an hour (their `last_err` holds a BEL and a NUL), with no worker.
async fn seed_dots_and_late(url: &str) {
    let q = Queue::connect(url).await.expect("SQLite opens a new file");
    q.clone()
        .named("..")
        .enqueue(Task::new("report", &1).task_id("d1"))
        .await
        .unwrap();
    // An hour ago, by a clock of its own: the retries fell due long before now.
    let clock = ManualClock::new(SystemTime::now() - Duration::from_secs(3600));
    let late = q.clone().named("late").with_clock(clock);
    let worker = Worker::new(late.clone())
        .concurrency(2)
        .retry_delay(|_n, _err, _task| Duration::from_secs(60))
        .handle("charge", |_task| async move {
            Err(BoxError::from("bell\u{7}nul\u{0}end"))
        });
    for n in 1..=2 {
        late.enqueue(Task::new("charge", &n).task_id(format!("late-{n}")))
            .await
            .unwrap();
    }
    assert_eq!(worker.run_due().await.unwrap(), 2);
    assert_eq!(late.inspector().count(TaskState::Retry).await.unwrap(), 2);
    assert_eq!(late.inspector().count(TaskState::Pending).await.unwrap(), 0);
    q.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dots_queue_overdue_retries_prefetched_tasks_and_control_characters_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    seed_dots_and_late(&url).await;
    let Some((client, base, _processes)) = browser(&url).await else {
        return;
    };
    // `busy`: a worker of one slot that prefetches two, on three slow tasks.
    let busy = Queue::connect(&url).await.unwrap().named("busy");
    for n in 1..=3 {
        busy.enqueue(Task::new("slow", &n).task_id(format!("busy-{n}")))
            .await
            .unwrap();
    }
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let held = release.clone();
    let worker = Worker::new(busy.clone())
        .concurrency(1)
        .prefetch(2)
        .poll_interval(Duration::from_millis(10))
        .heartbeat_interval(Duration::from_millis(100))
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
    let outcome = tokio::time::timeout(Duration::from_secs(120), async {
        dots_and_late(&client, &base).await?;
        prefetched_wait(&client, &base).await
    })
    .await;
    let _ = client.close().await;
    stop.send(()).ok();
    release.notify_waiters();
    running.await.unwrap().unwrap();
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => panic!("the browser steps took more than 2 minutes"),
    }
    let q = Queue::connect(&url).await.unwrap();
    assert!(q.named("..").inspector().is_paused().await.unwrap());
}

/// The Active tab of `busy`: three active tasks, one running, two prefetched and waiting.
async fn prefetched_wait(c: &Client, base: &str) -> Step {
    c.goto(&format!("{base}/#/q/busy/active"))
        .await
        .map_err(cmd("opening busy"))?;
    wait_texts(
        c,
        "a.tab[data-state='active'] .waiting",
        "the Active tab's split",
        |t| t == [" (1 running, 2 waiting)"],
    )
    .await?;
    wait_rows(c, "the three active tasks", |r| r.len() == 3).await?;
    wait_texts(
        c,
        "#tasks td.id .badge.waiting",
        "two rows marked waiting",
        |t| t == ["waiting", "waiting"],
    )
    .await
    .map(drop)
}

async fn dots_and_late(c: &Client, base: &str) -> Step {
    // The queue named `..`: opened from the overview's link, its task listed, paused.
    c.goto(&format!("{base}/"))
        .await
        .map_err(cmd("opening the page"))?;
    click(c, "tr.queue-row[data-queue='..'] a.queue-link").await?;
    click(c, "a.tab[data-state='pending']").await?;
    wait_rows(c, "the task of the queue `..`", |r| r == ["d1"]).await?;
    wait_texts(c, "#queue-name", "the queue's name", |t| t == [".."]).await?;
    click(c, "#main .title button.pause-toggle[data-action='pause']").await?;
    find(c, "#paused-badge").await?;
    // The header's clock is UTC, as every other time of the page.
    wait_texts(c, "#refreshed", "the header's clock", |t| {
        t.len() == 1 && t[0].starts_with("updated ") && t[0].ends_with(" UTC") && t[0].len() == 20
    })
    .await?;

    // `late`: nothing pending, two retries overdue, no worker: the banner says so.
    c.goto(&format!("{base}/#/q/late/retry"))
        .await
        .map_err(cmd("opening late"))?;
    banner_shown(c, true, "the banner over overdue retries").await?;
    wait_texts(c, "#no-worker", "the banner's words", |t| {
        t.len() == 1 && t[0].contains("0 tasks are pending or active") && t[0].contains("due since")
    })
    .await?;
    // BEL and NUL in the last error: shown as marked escapes, not as empty boxes.
    wait_texts(
        c,
        "#tasks td.last-err",
        "the control characters, escaped",
        |t| t.len() == 2 && t.iter().all(|e| e == "bell\\u{7}nul\\u{0}end"),
    )
    .await?;
    find(c, "#tasks td.last-err span.bidi").await?;
    c.goto(&format!("{base}/"))
        .await
        .map_err(cmd("opening the overview"))?;
    find(c, "tr.queue-row[data-queue='late'] .badge.no-worker").await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A clean page (issue 41, item 6): a page load logs no console error (the favicon was missing:
// a 404 on every load), and a queue whose tasks name no external system shows a sentence where
// the systems table goes (it showed a literal `null`).

/// The console's messages of level SEVERE since the last call (chromedriver's log endpoint).
async fn console_errors(c: &Client, driver: &str) -> Result<Vec<String>, String> {
    let session = c
        .session_id()
        .await
        .map_err(cmd("the session's id"))?
        .ok_or("no session id")?;
    let answer: Value = reqwest::Client::new()
        .post(format!("{driver}/session/{session}/se/log"))
        .header("content-type", "application/json")
        .body(json!({"type": "browser"}).to_string())
        .send()
        .await
        .map_err(|e| format!("chromedriver's log: {e}"))?
        .text()
        .await
        .map_err(|e| format!("chromedriver's log: {e}"))
        .and_then(|text| serde_json::from_str(&text).map_err(|e| format!("{e}: {text}")))?;
    let entries = answer["value"].as_array().cloned().unwrap_or_default();
    Ok(entries
        .iter()
        .filter(|e| e["level"] == "SEVERE")
        .map(|e| e["message"].as_str().unwrap_or("?").to_owned())
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_load_logs_no_console_error_and_no_systems_show_no_null() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let q = Queue::connect(&url).await.expect("SQLite opens a new file");
    q.enqueue(Task::new("report", &1).task_id("p1"))
        .await
        .unwrap();
    q.close().await;
    let Some((c, base, driver, _processes)) = browser_with_driver(&url).await else {
        return;
    };
    let steps = async {
        c.goto(&format!("{base}/#/q/default/pending"))
            .await
            .map_err(cmd("opening the queue"))?;
        wait_texts(&c, "#tabs .tab", "the tabs", |t| t.len() == 7).await?;
        let empty = wait_texts(&c, "#systems-empty", "the systems' empty state", |t| {
            t.len() == 1
        })
        .await?;
        assert_eq!(empty, ["No task of this queue names an external system."]);
        let main = c
            .execute("return document.getElementById('main').innerText", vec![])
            .await
            .map_err(cmd("reading the page"))?;
        let main = main.as_str().unwrap_or_default().to_owned();
        assert!(
            !main.split_whitespace().any(|word| word == "null"),
            "{main}"
        );
        // The overview too, then the console: nothing logged as an error on either load.
        c.goto(&format!("{base}/"))
            .await
            .map_err(cmd("opening the overview"))?;
        wait_texts(&c, "#queues tbody tr", "the overview", |t| t.len() == 1).await?;
        let errors = console_errors(&c, &driver).await?;
        assert_eq!(errors, Vec::<String>::new());
        Ok::<(), String>(())
    };
    let outcome = tokio::time::timeout(Duration::from_secs(90), steps).await;
    let _ = c.close().await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => panic!("the browser steps took more than 90 s"),
    }
}

// ---------------------------------------------------------------------------------------------
// The workers' last health probes in the systems table (issue 44, item 2): a worker of this
// process runs a probe that fails with markup and a bidirectional control in its error, and
// knows a second system without a probe; the table shows the failure with its error as text.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_systems_table_shows_each_systems_last_probe_as_text() {
    use retry_runtime::durable::SystemLimit;
    use retry_runtime::{declare_system, health};

    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let q = Queue::connect(&url).await.expect("SQLite opens a new file");
    let (probed, plain) = (declare_system("dash-probed"), declare_system("dash-plain"));
    q.enqueue_many([
        Task::new("charge", &1)
            .system(probed)
            .process_in(Duration::from_secs(3600)),
        Task::new("email", &2)
            .system(plain)
            .process_in(Duration::from_secs(3600)),
    ])
    .await
    .unwrap();
    let error = "<img src=x onerror=\"document.title='owned'\"> refused \u{202E}gnp.exe";
    let probe = health::probe(probed, Duration::from_millis(50), move || async move {
        Err::<(), _>(error)
    })
    .unwrap();
    let worker = Worker::new(q.clone())
        .limit(probed, SystemLimit::new())
        .limit(plain, SystemLimit::new())
        .heartbeat_interval(Duration::from_millis(100))
        .handle("charge", |_task| async { Ok::<(), BoxError>(()) })
        .handle("email", |_task| async { Ok::<(), BoxError>(()) });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        stopped.await.ok();
    }));
    // The report is in the database before the page asks (the page keeps systems for 30 s).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let systems = q.inspector().systems().await.unwrap();
        let reported = |name: &str| systems.iter().any(|s| s.system == name && s.workers == 1);
        let failed = systems
            .iter()
            .any(|s| s.probe.as_ref().is_some_and(|p| !p.passed));
        if reported("dash-plain") && failed {
            break;
        }
        assert!(Instant::now() < deadline, "no probe reported: {systems:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let Some((c, base, _processes)) = browser(&url).await else {
        stop.send(()).ok();
        running.await.unwrap().unwrap();
        probe.stop();
        return;
    };
    let steps = async {
        c.goto(&format!("{base}/#/q/default/scheduled"))
            .await
            .map_err(cmd("opening the queue"))?;
        let headers = wait_texts(&c, "#systems thead th", "the systems' headers", |t| {
            t.len() == 7
        })
        .await?;
        assert_eq!(headers.last().map(String::as_str), Some("Probe"));
        let cells = wait_texts(&c, "#systems tr.system td.probe", "the probe cells", |t| {
            t.len() == 2
        })
        .await?;
        // By name: dash-plain, then dash-probed.
        assert_eq!(cells[0], "-");
        let probed_cell = &cells[1];
        assert!(probed_cell.starts_with("failed "), "{probed_cell}");
        assert!(
            probed_cell.contains(" ago") || probed_cell.contains("now"),
            "{probed_cell}"
        );
        // The markup is text; the bidirectional control shows as its escape.
        assert!(
            probed_cell.ends_with(
                ": <img src=x onerror=\"document.title='owned'\"> refused \\u{202E}gnp.exe"
            ),
            "{probed_cell}"
        );
        let badge = wait_texts(
            &c,
            "#systems tr.system .badge.probe-failed",
            "the badge",
            |t| t.len() == 1,
        )
        .await?;
        assert_eq!(badge, ["failed"]);
        let injected = c
            .execute(
                "return [document.querySelectorAll('#systems img').length, document.title]",
                vec![],
            )
            .await
            .map_err(cmd("reading the page"))?;
        assert_eq!(injected[0], json!(0), "no element made of the error");
        assert_ne!(injected[1], json!("owned"));
        Ok::<(), String>(())
    };
    let outcome = tokio::time::timeout(Duration::from_secs(90), steps).await;
    let _ = c.close().await;
    stop.send(()).ok();
    running.await.unwrap().unwrap();
    probe.stop();
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => panic!("the browser steps took more than 90 s"),
    }
}
