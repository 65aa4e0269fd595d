//! `retry_runtime::config`: `RETRY_<SYSTEM>_<KEY>` and a TOML file, tighten-only, on a paused
//! clock. The configuration is process-wide: each test holds `SERIAL` and applies a whole
//! configuration of its own.

use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::time::Duration;

use retry_runtime::config::{self, Report, Source};
use retry_runtime::{Breaker, BreakerState, Bulkhead, Classify, Rejected, retry};
use tokio::time::Instant;

/// Held by each test for its whole run (an async lock: the tests await while holding it).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[derive(Debug, PartialEq)]
enum CallError {
    Unavailable,
    Rejected(Rejected),
}

impl From<Rejected> for CallError {
    fn from(rejected: Rejected) -> Self {
        CallError::Rejected(rejected)
    }
}

impl Classify for CallError {
    fn is_transient(&self) -> bool {
        *self == CallError::Unavailable
    }
    fn is_rejection(&self) -> bool {
        matches!(self, CallError::Rejected(_))
    }
}

/// Calls of each fn, and when they were made.
struct Calls {
    count: AtomicU32,
    at: Mutex<Vec<Instant>>,
}

impl Calls {
    const fn new() -> Calls {
        Calls {
            count: AtomicU32::new(0),
            at: Mutex::new(Vec::new()),
        }
    }

    fn record(&self) {
        self.count.fetch_add(1, SeqCst);
        self.at.lock().unwrap().push(Instant::now());
    }

    /// The calls since the last `take`, and the pauses between them.
    fn take(&self) -> (u32, Vec<Duration>) {
        let at = std::mem::take(&mut *self.at.lock().unwrap());
        let gaps = at.windows(2).map(|w| w[1] - w[0]).collect();
        (self.count.swap(0, SeqCst), gaps)
    }
}

static CHARGE: Calls = Calls::new();

#[retry(read, jitter = "none", system = "cfg-payments", name = "charge")]
async fn charge() -> Result<(), CallError> {
    CHARGE.record();
    Err(CallError::Unavailable)
}

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn fewer_attempts_apply_and_more_are_refused_naming_the_rule_and_the_compiled_value() {
    let _serial = SERIAL.lock().await;
    let report = config::apply(Source::vars(vars(&[("RETRY_CFG_PAYMENTS_ATTEMPTS", "2")])));
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.applied[0].system, "cfg-payments");
    charge().await.unwrap_err();
    assert_eq!(CHARGE.take().0, 2);

    let report = config::apply(Source::vars(vars(&[("RETRY_CFG_PAYMENTS_ATTEMPTS", "9")])));
    assert_eq!(report.applied, []);
    assert_eq!(
        report.refused[0].to_string(),
        "RETRY_CFG_PAYMENTS_ATTEMPTS=9 refused: above the ceiling of 5 attempts (R-RES-RE-3): more means the system is degrading; open a breaker or move the work to a durable queue. Configuration may only tighten: the compiled attempts = 3 at `charge` stay"
    );
    charge().await.unwrap_err();
    assert_eq!(CHARGE.take().0, 3, "the compiled value stays");

    let report = config::apply(Source::vars(vars(&[("RETRY_CFG_PAYMENTS_ATTEMPTS", "4")])));
    assert_eq!(
        report.refused[0].reason,
        "more attempts than `#[retry]` compiled (attempts = 3 at `charge`): configuration may only tighten (R-RES-RE-3), so the compiled attempts = 3 stay"
    );
    charge().await.unwrap_err();
    assert_eq!(CHARGE.take().0, 3);
}

#[tokio::test(start_paused = true)]
async fn retries_off_makes_exactly_one_attempt() {
    let _serial = SERIAL.lock().await;
    let report = config::apply(Source::vars(vars(&[("RETRY_CFG_PAYMENTS_RETRIES", "off")])));
    assert!(report.is_clean(), "{report}");
    charge().await.unwrap_err();
    assert_eq!(CHARGE.take().0, 1);
    config::apply(Source::vars(vars(&[("RETRY_CFG_PAYMENTS_RETRIES", "on")])));
    charge().await.unwrap_err();
    assert_eq!(CHARGE.take().0, 3);
}

#[tokio::test(start_paused = true)]
async fn configured_delays_shape_the_pauses_within_the_five_second_window() {
    let _serial = SERIAL.lock().await;
    // Longer than the compiled 200ms and 5s: a shorter one would be looser (config_refusals.rs).
    let report = config::apply(Source::vars(vars(&[
        ("RETRY_CFG_PAYMENTS_DELAY", "300ms"),
        ("RETRY_CFG_PAYMENTS_MAX_DELAY", "6s"),
    ])));
    assert!(report.is_clean(), "{report}");
    charge().await.unwrap_err();
    assert_eq!(
        CHARGE.take(),
        (
            3,
            vec![Duration::from_millis(300), Duration::from_millis(600)]
        )
    );

    // 2 s then 4 s of pauses at `charge` (3 attempts): beyond the 5 s window.
    let report = config::apply(Source::vars(vars(&[("RETRY_CFG_PAYMENTS_DELAY", "2s")])));
    assert_eq!(
        report.refused[0].reason,
        "at `charge` (attempts = 3) the pauses of delay = 2s, max_delay = 5s may add up to 6s, beyond the 5s an in-memory retry may take (R-RES-RE-4); the compiled schedule stays"
    );
    let report = config::apply(Source::vars(vars(&[("RETRY_CFG_PAYMENTS_DELAY", "0ms")])));
    assert!(report.refused[0].reason.contains("R-RES-RE-X3"), "{report}");
    let report = config::apply(Source::vars(vars(&[
        ("RETRY_CFG_PAYMENTS_DELAY", "5s"),
        ("RETRY_CFG_PAYMENTS_MAX_DELAY", "5s"),
    ])));
    assert!(report.refused[0].reason.contains("R-RES-RE-X3"), "{report}");
    assert_eq!(report.refused.len(), 2, "both halves of the schedule");
    charge().await.unwrap_err();
    assert_eq!(
        CHARGE.take(),
        (
            3,
            vec![Duration::from_millis(200), Duration::from_millis(400)]
        )
    );
}

#[tokio::test(start_paused = true)]
async fn a_reload_applies_within_one_call_and_a_refused_one_keeps_the_old() {
    let _serial = SERIAL.lock().await;
    config::apply(Source::vars(vars(&[])));
    charge().await.unwrap_err();
    assert_eq!(CHARGE.take().0, 3);
    let applied = config::reload(Source::vars(vars(&[("RETRY_CFG_PAYMENTS_ATTEMPTS", "1")])));
    assert!(applied.is_ok(), "{applied:?}");
    // The very next call.
    charge().await.unwrap_err();
    assert_eq!(CHARGE.take().0, 1);
    // One good value and one refused: nothing of it applies.
    let refused = config::reload(Source::vars(vars(&[
        ("RETRY_CFG_PAYMENTS_ATTEMPTS", "2"),
        ("RETRY_CFG_PAYMENTS_BULKHEAD", "zero"),
    ])))
    .unwrap_err();
    assert_eq!(refused.applied, []);
    assert_eq!(refused.refused.len(), 1);
    charge().await.unwrap_err();
    assert_eq!(CHARGE.take().0, 1, "the old configuration stays");
}

#[tokio::test(start_paused = true)]
async fn the_code_s_bulkhead_and_breaker_may_be_tightened_never_loosened() {
    let _serial = SERIAL.lock().await;
    retry_runtime::system("cfg-partner").set_bulkhead(Bulkhead::new(20));
    retry_runtime::system("cfg-partner").set_breaker(Breaker::new().consecutive_failures(5));
    let report = config::apply(Source::vars(vars(&[
        ("RETRY_CFG_PARTNER_BULKHEAD", "30"),
        ("RETRY_CFG_PARTNER_BREAKER_CONSECUTIVE", "8"),
        ("RETRY_CFG_PARTNER_BREAKER", "off"),
    ])));
    assert_eq!(report.applied, []);
    assert_eq!(report.refused.len(), 3, "{report}");
    assert_eq!(
        report.refused[0].reason,
        "more calls in flight than the bulkhead the code set (20): configuration may only tighten; 20 stays"
    );
    assert_eq!(
        retry_runtime::system("cfg-partner")
            .bulkhead_state()
            .map(|s| (s.in_flight, s.limit)),
        Some((0, 20)) // (in_flight, limit)
    );

    let report = config::apply(Source::vars(vars(&[
        ("RETRY_CFG_PARTNER_BULKHEAD", "5"),
        ("RETRY_CFG_PARTNER_BREAKER_CONSECUTIVE", "1"),
    ])));
    assert!(report.is_clean(), "{report}");
    assert_eq!(
        retry_runtime::system("cfg-partner")
            .bulkhead_state()
            .map(|s| (s.in_flight, s.limit)),
        Some((0, 5)) // (in_flight, limit)
    );
    partner().await.unwrap_err();
    assert_eq!(PARTNER.take().0, 1, "one failure opens it now");
    assert!(matches!(
        retry_runtime::system("cfg-partner").breaker_state(),
        Some(BreakerState::Open { .. })
    ));
    // A reload that leaves the breaker's settings as they are keeps it open.
    config::reload(Source::vars(vars(&[
        ("RETRY_CFG_PARTNER_BULKHEAD", "5"),
        ("RETRY_CFG_PARTNER_BREAKER_CONSECUTIVE", "1"),
        ("RETRY_CFG_PARTNER_RETRIES", "off"),
    ])))
    .unwrap();
    assert!(matches!(
        retry_runtime::system("cfg-partner").breaker_state(),
        Some(BreakerState::Open { .. })
    ));
    // Without the configuration, the code's settings are back.
    config::apply(Source::vars(vars(&[])));
    assert_eq!(
        retry_runtime::system("cfg-partner")
            .bulkhead_state()
            .map(|s| (s.in_flight, s.limit)),
        Some((0, 20)) // (in_flight, limit)
    );
}

static PARTNER: Calls = Calls::new();

#[retry(read, jitter = "none", system = "cfg-partner", protect)]
async fn partner() -> Result<(), CallError> {
    PARTNER.record();
    Err(CallError::Unavailable)
}

static LEGACY: Calls = Calls::new();

#[retry(read, jitter = "none", system = "cfg-legacy", protect)]
async fn legacy() -> Result<(), CallError> {
    LEGACY.record();
    Err(CallError::Unavailable)
}

#[tokio::test(start_paused = true)]
async fn the_configuration_alone_may_give_a_system_a_breaker_and_a_bulkhead() {
    let _serial = SERIAL.lock().await;
    assert_eq!(retry_runtime::system("cfg-legacy").breaker_state(), None);
    let report = config::apply(Source::vars(vars(&[
        ("RETRY_CFG_LEGACY_BREAKER_CONSECUTIVE", "2"),
        ("RETRY_CFG_LEGACY_BULKHEAD", "3"),
    ])));
    assert!(report.is_clean(), "{report}");
    assert_eq!(
        retry_runtime::system("cfg-legacy").breaker_state(),
        Some(BreakerState::Closed)
    );
    assert_eq!(
        retry_runtime::system("cfg-legacy")
            .bulkhead_state()
            .map(|s| (s.in_flight, s.limit)),
        Some((0, 3)) // (in_flight, limit)
    );
    legacy().await.unwrap_err();
    assert_eq!(LEGACY.take().0, 2, "the second failure opened it");
    assert_eq!(
        legacy().await,
        Err(CallError::Rejected(Rejected::BreakerOpen {
            system: "cfg-legacy"
        }))
    );
    config::apply(Source::vars(vars(&[])));
    assert_eq!(retry_runtime::system("cfg-legacy").breaker_state(), None);
}

#[tokio::test(start_paused = true)]
async fn unknown_systems_and_keys_are_refused_and_other_variables_left_alone() {
    let _serial = SERIAL.lock().await;
    let report = config::apply(Source::vars(vars(&[
        ("RETRY_NO_SUCH_SYSTEM_ATTEMPTS", "2"),
        ("RETRY_TEST_POSTGRES_URL", "postgres://127.0.0.1/x"),
        ("RETRY_QUEUE_TOKEN", "0123456789abcdef"),
        ("RETRY_CFG_PAYMENTS_ATTEMPTS", "two"),
        ("PATH", "/usr/bin"),
    ])));
    assert_eq!(report.applied, []);
    let refused: Vec<_> = report
        .refused
        .iter()
        .map(|r| (r.source.as_str(), r.reason.clone()))
        .collect();
    assert_eq!(refused.len(), 2, "{report}");
    assert_eq!(refused[0].0, "RETRY_NO_SUCH_SYSTEM_ATTEMPTS");
    assert!(
        refused[0].1.starts_with(
            "no system named like `NO_SUCH_SYSTEM`: the systems this program knows are "
        ),
        "{}",
        refused[0].1
    );
    assert!(refused[0].1.contains("`cfg-payments`"));
    assert_eq!(refused[1].0, "RETRY_CFG_PAYMENTS_ATTEMPTS");
    assert_eq!(refused[1].1, "expected a whole number from 1 to 4294967295");
}

#[tokio::test(start_paused = true)]
async fn a_file_takes_the_same_keys_and_a_broken_one_changes_nothing() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("retry.toml");
    std::fs::write(
        &path,
        "[systems.cfg-payments]\nattempts = 2\ndelay = \"300ms\"\nmax_delay = \"6s\"\n",
    )
    .unwrap();
    let report = config::apply(Source::file(&path));
    assert!(report.is_clean(), "{report}");
    assert_eq!(
        report.applied[0].source,
        format!("{}: systems.cfg-payments.attempts", path.display())
    );
    charge().await.unwrap_err();
    assert_eq!(CHARGE.take(), (2, vec![Duration::from_millis(300)]));

    std::fs::write(&path, "[systems.cfg-payments\nattempts = 1\n").unwrap();
    let report: Report = config::reload(Source::file(&path)).unwrap_err();
    assert!(
        report.refused[0].reason.starts_with("is not valid TOML"),
        "{report}"
    );
    charge().await.unwrap_err();
    assert_eq!(CHARGE.take().0, 2, "the old configuration stays");

    std::fs::write(
        &path,
        "[systems.cfg-payments]\nattempts = 9\nretrys = \"off\"\n",
    )
    .unwrap();
    let report = config::apply(Source::file(&path));
    assert_eq!(report.refused.len(), 2, "{report}");
    assert!(report.refused[0].reason.contains("R-RES-RE-3"));
    assert!(report.refused[1].reason.starts_with("unknown key `retrys`"));
}

/// The protections ask the configuration what is in effect through a seam
/// (`protect::tighten_with`) rather than naming it: a bulkhead the code sets *after* the
/// configuration applied is tightened by it at once, as one set before is.
#[tokio::test(start_paused = true)]
async fn a_bulkhead_set_after_the_configuration_is_tightened_by_it() {
    let _serial = SERIAL.lock().await;
    // A budget makes the system known to the configuration.
    let late = retry_runtime::system("cfg-late");
    late.set_budget(retry_runtime::Budget::adaptive());
    let report = config::apply(Source::vars(vars(&[("RETRY_CFG_LATE_BULKHEAD", "4")])));
    assert!(report.is_clean(), "{report}");
    late.set_bulkhead(Bulkhead::new(20).max_wait(Duration::from_millis(30)));
    assert_eq!(
        late.bulkhead_state().map(|s| (s.in_flight, s.limit)),
        Some((0, 4)) // (in_flight, limit)
    );
    config::apply(Source::vars(vars(&[])));
    assert_eq!(
        late.bulkhead_state().map(|s| (s.in_flight, s.limit)),
        Some((0, 20)), // (in_flight, limit)
        "without the configuration, the code's limit is back"
    );
}

#[tokio::test(start_paused = true)]
async fn a_layer_s_system_is_known_once_it_served_a_call_or_has_a_budget() {
    let _serial = SERIAL.lock().await;
    let refused = config::apply(Source::vars(vars(&[("RETRY_CFG_LAYER_RETRIES", "off")])));
    assert!(
        refused.refused[0]
            .reason
            .starts_with("no system named like `CFG_LAYER`")
    );
    retry_runtime::system("cfg-layer").set_budget(retry_runtime::Budget::adaptive());
    let report = config::apply(Source::vars(vars(&[("RETRY_CFG_LAYER_RETRIES", "off")])));
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.applied[0].system, "cfg-layer");
}

#[test]
fn the_environment_configures_a_program_without_a_rebuild() {
    let run = |env: &[(&str, &str)]| {
        let output = Command::new(env!("CARGO_BIN_EXE_config_probe"))
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    assert_eq!(run(&[]), "attempts: 3\n");
    assert_eq!(run(&[("RETRY_PAYMENTS_ATTEMPTS", "2")]), "attempts: 2\n");
    assert_eq!(run(&[("RETRY_PAYMENTS_RETRIES", "off")]), "attempts: 1\n");
    let refused = run(&[("RETRY_PAYMENTS_ATTEMPTS", "9")]);
    assert_eq!(
        refused,
        "refused: RETRY_PAYMENTS_ATTEMPTS=9 refused: above the ceiling of 5 attempts (R-RES-RE-3): more means the system is degrading; open a breaker or move the work to a durable queue. Configuration may only tighten: the compiled attempts = 3 at `charge_status` stay\nattempts: 3\n"
    );
}
