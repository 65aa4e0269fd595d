//! Instructions per call on the happy path and on refusals, counted by callgrind (exact and
//! load-independent, where the times of `happy_path` and `protect` move with the machine's load).
//!
//! The bench runs itself under `valgrind --tool=callgrind` twice per row, with 20 000 and then
//! 120 000 calls, and prints the difference of the two totals over 100 000: what is built once
//! (the runtime, the services, a `#[retry]` fn's site) cancels out. Every call is one poll with a
//! no-op waker outside any runtime, as in `happy_path` and `protect`. Needs valgrind on `PATH`.
//!
//! `cargo bench -p retry-benches --bench instructions [-- ROW_SUBSTRING]`

use std::future::Future as _;
use std::hint::black_box;
use std::process::Command;
use std::task::{Context, Waker};

use layered::Service as _;
use retry_benches::{CallError, Flaky, Unavailable, operation, peers, poll_once};
use retry_runtime::{Breaker, Bulkhead, retry};

/// The child's environment: the row to run, and how many calls.
const ROW: &str = "RETRY_INSTRUCTIONS_ROW";
const CALLS: &str = "RETRY_INSTRUCTIONS_CALLS";
const FEW: u64 = 20_000;
const MANY: u64 = 120_000;

async fn call(server: &Flaky) -> Result<u32, CallError> {
    operation(server)
        .await
        .map_err(|Unavailable { .. }| CallError::Unavailable)
}

#[retry(read, system = "instr-plain")]
async fn plain(server: &Flaky) -> Result<u32, CallError> {
    call(server).await
}

#[retry(read, system = "instr-breaker", protect)]
async fn with_breaker(server: &Flaky) -> Result<u32, CallError> {
    call(server).await
}

#[retry(read, system = "instr-both", protect)]
async fn with_both(server: &Flaky) -> Result<u32, CallError> {
    call(server).await
}

#[retry(read, system = "instr-open", protect)]
async fn breaker_open(server: &Flaky) -> Result<u32, CallError> {
    call(server).await
}

#[retry(read, system = "instr-full", protect)]
async fn bulkhead_full(server: &Flaky) -> Result<u32, CallError> {
    std::future::pending::<()>().await;
    call(server).await
}

/// `plain` with a `fallback` (issue 44): on the happy path it must cost what `plain` costs.
#[retry(read, system = "instr-plain-fallback", fallback = cached(reason))]
async fn with_fallback(server: &Flaky) -> Result<u32, CallError> {
    call(server).await
}

/// The fallback's answer: never reached on the happy path.
async fn cached(reason: retry_runtime::GiveUp) -> Result<u32, CallError> {
    Ok(black_box(reason as u32))
}

/// The rows, in table order.
const ROWS: [&str; 21] = [
    "undecorated fn",
    "hand-written loop",
    "#[retry] (default budget)",
    "#[retry], budget unlimited",
    "backon 1.x",
    "tokio-retry 0.3",
    "tokio-retry2 0.9",
    "seatbelt 0.11 retry",
    "tower-resilience 0.13 retry",
    "protect: #[retry(read, system)]",
    "protect: the same with `fallback = …` (not called)",
    "protect: + protect, closed breaker",
    "protect: + protect, closed breaker and a bulkhead",
    "protect: refused by an open breaker",
    "protect: refused by a full bulkhead",
    "seatbelt 0.11 breaker, closed",
    "seatbelt 0.11 retry + breaker, closed",
    "seatbelt 0.11 breaker, open (refusal)",
    "tower-resilience 0.13 retry + breaker + bulkhead",
    "tower-resilience 0.13 breaker, open (refusal)",
    "tower-resilience 0.13 bulkhead, full (refusal)",
];

fn main() {
    match (std::env::var(ROW), std::env::var(CALLS)) {
        (Ok(row), Ok(calls)) => run(&row, calls.parse().expect("a number of calls")),
        _ => measure(),
    }
}

/// The parent: each row twice under callgrind, the difference per call.
fn measure() {
    let filter = std::env::args()
        .skip(1)
        .find(|arg| !arg.starts_with('-'))
        .unwrap_or_default();
    let exe = std::env::current_exe().expect("this bench's path");
    println!("## instructions per call (callgrind, {MANY} − {FEW} calls, one poll each)\n");
    println!("| row | instructions per call |");
    println!("| --- | ---: |");
    for row in ROWS.iter().filter(|row| row.contains(filter.as_str())) {
        let total = |calls: u64| -> u64 {
            let output = Command::new("valgrind")
                .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
                .arg(&exe)
                .env(ROW, row)
                .env(CALLS, calls.to_string())
                .output()
                .expect("valgrind runs (apt-get install valgrind)");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "{row}: {stderr}");
            stderr
                .lines()
                .find_map(|line| line.split("Collected : ").nth(1))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("{row}: no total in {stderr}"))
        };
        let (few, many) = (total(FEW), total(MANY));
        let per_call = (many as f64 - few as f64) / (MANY - FEW) as f64;
        println!("| {row} | {per_call:.1} |");
    }
}

/// The child: builds every row (the same work for both counts), then calls one `calls` times.
fn run(row: &str, calls: u64) {
    static UP: Flaky = Flaky::new(0);
    static DOWN: Flaky = Flaky::new(u32::MAX);
    retry_benches::unbudgeted();
    let rt = retry_benches::runtime(false);
    let _entered = rt.enter();
    retry_runtime::system("instr-breaker").set_breaker(Breaker::new());
    retry_runtime::system("instr-both").set_breaker(Breaker::new());
    retry_runtime::system("instr-both").set_bulkhead(Bulkhead::new(1 << 20));
    retry_runtime::system("instr-open").set_breaker(
        Breaker::new()
            .consecutive_failures(1)
            .open_for(std::time::Duration::from_secs(3_600)),
    );
    rt.block_on(async { breaker_open(&DOWN).await.unwrap_err() });
    retry_runtime::system("instr-full").set_bulkhead(Bulkhead::new(1));
    let mut held = Box::pin(bulkhead_full(&UP));
    let noop = &mut Context::from_waker(Waker::noop());
    assert!(held.as_mut().poll(noop).is_pending());

    let clock = peers::seatbelt_clock();
    let seatbelt = peers::seatbelt_retry(&clock);
    let tower = peers::tower_retry();
    let seatbelt_breaker = peers::seatbelt_breaker(&clock, 100);
    let seatbelt_retry_breaker = peers::seatbelt_retry_breaker(&clock);
    let seatbelt_open = peers::seatbelt_breaker(&clock, 1);
    for _ in 0..1_000 {
        let _ = poll_once(|| seatbelt_open.execute(&DOWN));
    }
    let tower_stack = peers::tower_stack(1 << 20);
    let tower_open = peers::tower_breaker(true);
    poll_once(|| peers::tower_call(&tower_open, &DOWN)).unwrap_err();
    let tower_full = peers::tower_bulkhead_hanging(1);
    let mut tower_held = Box::pin(peers::tower_call(&tower_full, &UP));
    assert!(tower_held.as_mut().poll(noop).is_pending());

    let server = black_box(&UP);
    let index = ROWS.iter().position(|r| *r == row).expect("a known row");
    for _ in 0..calls {
        let ok = match index {
            0 => poll_once(|| operation(server)).is_ok(),
            1 => poll_once(|| retry_benches::hand_loop(server)).is_ok(),
            2 => poll_once(|| retry_benches::with_retry(server)).is_ok(),
            3 => poll_once(|| retry_benches::with_retry_unbudgeted(server)).is_ok(),
            4 => poll_once(|| retry_benches::with_backon(server)).is_ok(),
            5 => poll_once(|| retry_benches::with_tokio_retry(server)).is_ok(),
            6 => poll_once(|| retry_benches::with_tokio_retry2(server)).is_ok(),
            7 => poll_once(|| seatbelt.execute(server)).is_ok(),
            8 => poll_once(|| peers::tower_call(&tower, server)).is_ok(),
            9 => poll_once(|| plain(server)).is_ok(),
            10 => poll_once(|| with_fallback(server)).is_ok(),
            11 => poll_once(|| with_breaker(server)).is_ok(),
            12 => poll_once(|| with_both(server)).is_ok(),
            13 => poll_once(|| breaker_open(black_box(&DOWN))).is_err(),
            14 => poll_once(|| bulkhead_full(server)).is_err(),
            15 => poll_once(|| seatbelt_breaker.execute(server)).is_ok(),
            16 => poll_once(|| seatbelt_retry_breaker.execute(server)).is_ok(),
            17 => poll_once(|| seatbelt_open.execute(black_box(&DOWN))).is_err(),
            18 => poll_once(|| peers::tower_call(&tower_stack, server)).is_ok(),
            19 => poll_once(|| peers::tower_call(&tower_open, black_box(&DOWN))).is_err(),
            // Not ready on its first poll (a zero timeout, fired by the runtime's timer).
            _ => rt.block_on(peers::tower_call(&tower_full, server)).is_err(),
        };
        assert!(ok, "{row}: the expected answer");
    }
    drop((held, tower_held));
}
