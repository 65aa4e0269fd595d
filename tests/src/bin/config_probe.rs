//! A program whose retry settings come from its environment (tests/tests/config.rs): it reads
//! `RETRY_<SYSTEM>_<KEY>` once at start-up, prints what the configuration refused, then calls a
//! system that is always down and prints how many attempts the call made. Its events (the
//! give-up's among them) go to stderr.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};

use retry_runtime::{Classify, retry};

#[derive(Debug)]
struct Unavailable;

impl Classify for Unavailable {
    fn is_transient(&self) -> bool {
        true
    }
}

static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

#[retry(
    read,
    attempts = 3,
    delay = "1ms",
    max_delay = "2ms",
    system = "payments",
    name = "charge_status"
)]
async fn charge_status() -> Result<(), Unavailable> {
    ATTEMPTS.fetch_add(1, SeqCst);
    Err(Unavailable)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .without_time()
        .init();
    let report = retry_runtime::config::apply(retry_runtime::config::Source::Env);
    for refused in &report.refused {
        println!("refused: {refused}");
    }
    charge_status().await.unwrap_err();
    println!("attempts: {}", ATTEMPTS.load(SeqCst));
}
