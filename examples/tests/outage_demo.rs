//! `cargo run --example payments -- --outage`: the same charges through a dead gateway with and
//! without `protect`. This runs the example binary (built beside the tests) and holds the
//! protected run to the breaker's promise: once open, at most a round of probes per 5 s interval
//! reaches the dead gateway, against thousands without it.

use std::process::Command;

use retry_examples::outage::BULKHEAD;

mod common;
use common::demo_binary;

/// The number after `label` in `line`.
fn figure(line: &str, label: &str) -> u64 {
    let at = line
        .find(label)
        .unwrap_or_else(|| panic!("{label:?} in {line:?}"))
        + label.len();
    line[at..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a number after {label:?} in {line:?}"))
}

#[test]
fn protect_keeps_a_dead_gateway_to_a_few_probes() {
    let output = Command::new(demo_binary())
        .arg("--outage")
        .output()
        .expect("the payments demo runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    let (plain, protected) = (lines[1], lines[2]);
    assert!(plain.starts_with("#[retry(write, …)]:"), "{plain}");
    assert!(
        protected.starts_with("#[retry(write, …, protect)]:"),
        "{protected}"
    );
    let dead = "calls to the dead gateway:";
    let (plain_calls, protected_calls) = (figure(plain, dead), figure(protected, dead));
    // The default breaker opens after 10 consecutive failures; the calls already on their way
    // then still reach the gateway (at most the bulkhead's others: more of them on a loaded
    // machine, where each takes longer; CI saw 21 calls while two test suites ran at once);
    // then each 5 s interval of the 10 s outage lets one round of 3 probes through at most.
    let in_flight = u64::from(BULKHEAD) - 1;
    assert!(protected_calls <= 10 + in_flight + 3 * 3, "{protected}");
    assert!(plain_calls >= 20 * protected_calls, "{plain}\n{protected}");
    assert_eq!(figure(plain, "refused at once:"), 0, "{plain}");
    assert!(figure(protected, "refused at once:") > 0, "{protected}");
}
