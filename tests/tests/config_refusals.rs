//! Issue 40, "configuration says what it does", reproduced by the bug report's own steps: a
//! queue limit looser than the worker's code is refused (and not applied), a shorter delay is
//! refused as looser, a misspelt key of a known system is refused naming the nearest key, and
//! the give-up event shows the attempts in effect. The configuration is process-wide: each
//! in-process test holds `SERIAL` and applies a whole configuration of its own; the others run
//! `config_probe` as a program of its own, configured by its environment.

use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use retry_runtime::config::{self, Source};
use retry_runtime::durable::{SystemLimit, Task};
use retry_runtime::{BoxError, Classify, declare_system, retry};
use retry_tests::durable_env::{Backend, Env, worker};
use tokio::time::Instant;

/// Held by each in-process test for its whole run.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[derive(Debug)]
struct Unavailable;

impl Classify for Unavailable {
    fn is_transient(&self) -> bool {
        true
    }
}

/// When `pace` was called since the last `take`.
static PACE: Mutex<Vec<Instant>> = Mutex::new(Vec::new());

// Compiled: 3 attempts, delay 200ms, max_delay 5s.
#[retry(read, jitter = "none", system = "cfg-pace", name = "pace")]
async fn pace() -> Result<(), Unavailable> {
    PACE.lock().unwrap().push(Instant::now());
    Err(Unavailable)
}

/// The pauses between the calls of `pace` since the last look.
fn pauses() -> Vec<Duration> {
    let at = std::mem::take(&mut *PACE.lock().unwrap());
    at.windows(2).map(|w| w[1] - w[0]).collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(start_paused = true)]
async fn a_shorter_delay_or_max_delay_is_looser_and_refused_naming_the_compiled_value() {
    let _serial = SERIAL.lock().await;
    // 10 ms: twenty times faster retries against a system that is failing.
    let report = config::apply(Source::vars([("RETRY_CFG_PACE_DELAY", "10ms")]));
    assert_eq!(report.applied, []);
    assert_eq!(
        report.refused[0].to_string(),
        "RETRY_CFG_PACE_DELAY=10ms refused: a shorter delay than `#[retry]` compiled (delay = 200ms at `pace`): faster retries hammer a degrading system (R-RES-RE-X3); configuration may only tighten, so the compiled delay = 200ms stays"
    );
    pace().await.unwrap_err();
    assert_eq!(pauses(), [ms(200), ms(400)], "the compiled schedule stays");

    let report = config::apply(Source::vars([("RETRY_CFG_PACE_MAX_DELAY", "1s")]));
    assert_eq!(
        report.refused[0].reason,
        "a shorter max_delay than `#[retry]` compiled (max_delay = 5s at `pace`): faster retries hammer a degrading system (R-RES-RE-X3); configuration may only tighten, so the compiled max_delay = 5s stays"
    );

    // Longer pauses tighten: applied, within the 5 s window.
    let report = config::apply(Source::vars([
        ("RETRY_CFG_PACE_DELAY", "300ms"),
        ("RETRY_CFG_PACE_MAX_DELAY", "6s"),
    ]));
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.applied.len(), 2);
    pace().await.unwrap_err();
    assert_eq!(pauses(), [ms(300), ms(600)]);
    config::apply(Source::vars(std::iter::empty::<(&str, &str)>()));
}

#[tokio::test]
async fn a_queue_concurrency_looser_than_the_workers_limit_is_refused_and_not_applied() {
    let _serial = SERIAL.lock().await;
    let env = Env::new(Backend::Sqlite, "config-queue").await.unwrap();
    let tasks = (0..3).map(|n| Task::new("post", &n).system(declare_system("cfg-partner")));
    env.q.enqueue_many(tasks).await.unwrap();
    let w = worker(&env)
        .limit(
            declare_system("cfg-partner"),
            SystemLimit::new().concurrency(1).rate(50.0),
        )
        .handle("post", |_| async { Ok::<(), BoxError>(()) });
    let report = config::apply(Source::vars([
        ("RETRY_CFG_PARTNER_QUEUE_CONCURRENCY", "3"),
        ("RETRY_CFG_PARTNER_QUEUE_RATE", "100"),
    ]));
    assert_eq!(report.applied, [], "{report}");
    assert_eq!(
        report.refused[0].to_string(),
        "RETRY_CFG_PARTNER_QUEUE_CONCURRENCY=3 refused: more tasks at once than a durable worker's code set for the system (`Worker::limit`: concurrency 1): configuration may only tighten, so concurrency 1 stays"
    );
    assert_eq!(
        report.refused[1].reason,
        "more tasks per second than a durable worker's code set for the system (`Worker::limit`: rate 50): configuration may only tighten, so rate 50 stays"
    );
    let ran = w.run_due().await.unwrap();
    config::apply(Source::vars(std::iter::empty::<(&str, &str)>()));
    assert_eq!(ran, 1, "the code's concurrency of 1 stays");
}

/// `config_probe` run with `env`: its stdout and its stderr.
fn probe(env: &[(&str, &str)]) -> (String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_config_probe"))
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    (
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn a_misspelt_key_of_a_known_system_is_refused_naming_the_nearest_key() {
    // The kill switch with a typo, during an incident.
    let (out, _) = probe(&[("RETRY_PAYMENTS_ATTEMPT", "2")]);
    assert!(
        out.starts_with(
            "refused: RETRY_PAYMENTS_ATTEMPT=2 refused: unknown key `ATTEMPT` of system `payments`: did you mean `RETRY_PAYMENTS_ATTEMPTS`?"
        ),
        "{out}"
    );
    assert!(out.ends_with("\nattempts: 3\n"), "{out}");
    let (out, _) = probe(&[("RETRY_PAYMENTS_RETRYS", "off")]);
    assert!(
        out.contains("did you mean `RETRY_PAYMENTS_RETRIES`?"),
        "{out}"
    );
    // Not a system of the program and not a key of ours: another program's variable.
    assert_eq!(probe(&[("RETRY_SOMETHING_ELSE", "1")]).0, "attempts: 3\n");
}

#[test]
fn the_give_up_event_shows_the_attempts_in_effect() {
    let (out, log) = probe(&[("RETRY_PAYMENTS_ATTEMPTS", "2")]);
    assert_eq!(out, "attempts: 2\n");
    let give_up = log
        .lines()
        .find(|line| line.contains("transient failure, giving up"))
        .unwrap_or_else(|| panic!("no give-up event in {log}"));
    assert!(give_up.contains(" attempt=2 attempts=2 "), "{give_up}");
    let retrying = log
        .lines()
        .find(|line| line.contains("transient failure, retrying"))
        .unwrap_or_else(|| panic!("no retrying event in {log}"));
    assert!(retrying.contains(" attempt=1 attempts=2 "), "{retrying}");
}

#[tokio::test(start_paused = true)]
async fn a_file_refuses_a_misspelt_key_or_system_naming_the_nearest() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("retry.toml");
    std::fs::write(
        &path,
        "[systems.cfg-pace]\nattempt = 2\n\n[systems.cfg-pase]\nretries = \"off\"\n",
    )
    .unwrap();
    let report = config::apply(Source::file(&path));
    assert_eq!(report.applied, [], "{report}");
    assert_eq!(report.refused.len(), 2, "{report}");
    // The unknown system first (it is judged before the values), then the misspelt key.
    assert!(
        report.refused[0]
            .reason
            .starts_with("no system named `cfg-pase`: did you mean `[systems.cfg-pace]`?"),
        "{report}"
    );
    assert_eq!(
        report.refused[1].source,
        format!("{}: systems.cfg-pace.attempt", path.display())
    );
    assert!(
        report.refused[1]
            .reason
            .starts_with("unknown key `attempt`: did you mean `attempts`?"),
        "{report}"
    );
    config::apply(Source::vars(std::iter::empty::<(&str, &str)>()));
}

/// Each source that cannot be read whole is refused whole, naming why, and a reload of it keeps
/// the configuration in force: a file that is missing, TOML text that does not parse, TOML that
/// holds something other than `[systems.<name>]` tables.
#[tokio::test(start_paused = true)]
async fn a_source_that_cannot_be_read_is_refused_whole_and_changes_nothing() {
    let _serial = SERIAL.lock().await;
    let report = config::apply(Source::vars([("RETRY_CFG_PACE_ATTEMPTS", "2")]));
    assert!(report.is_clean(), "{report}");

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let report = config::reload(Source::file(&missing)).unwrap_err();
    assert_eq!(report.applied, []);
    assert_eq!(report.refused.len(), 1, "{report}");
    assert_eq!(report.refused[0].source, missing.display().to_string());
    assert_eq!(report.refused[0].value, "(the whole file)");
    assert!(
        report.refused[0].reason.starts_with("cannot be read: "),
        "{report}"
    );

    let report =
        config::reload(Source::Toml("[systems.cfg-pace\nattempts = 1\n".into())).unwrap_err();
    assert_eq!(report.refused.len(), 1, "{report}");
    assert_eq!(report.refused[0].source, "(TOML text)");
    assert!(
        report.refused[0].reason.starts_with("is not valid TOML: "),
        "{report}"
    );

    let report = config::reload(Source::Toml("attempts = 1\n".into())).unwrap_err();
    assert_eq!(report.applied, []);
    assert_eq!(
        report.refused[0].to_string(),
        "(TOML text): attempts=integer refused: the file holds `[systems.<name>]` tables only"
    );

    // The refused reloads changed nothing (an `apply` would have replaced the configuration
    // with the values it read, none): 2 attempts are still in force ...
    pace().await.unwrap_err();
    assert_eq!(pauses().len(), 1, "2 attempts: one pause");
    // ... until a source that reads applies whole.
    let report = config::reload(Source::Toml("[systems.cfg-pace]\nattempts = 1\n".into())).unwrap();
    assert_eq!(
        report.applied[0].source,
        "(TOML text): systems.cfg-pace.attempts"
    );
    pace().await.unwrap_err();
    assert_eq!(pauses(), []);
    config::apply(Source::vars(std::iter::empty::<(&str, &str)>()));
}
