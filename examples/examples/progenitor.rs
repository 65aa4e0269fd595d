//! A generated OpenAPI client, wrapped the right way: `cargo run --example progenitor`.
//!
//! progenitor generates `Client` from `examples/openapi/gateway.json` (the demo gateway's API)
//! at build time; `retry_examples::generated_gateway::Payments` is the adapter whose public
//! methods carry `#[retry(write, idempotency_key = key)]` (`charge`) and `#[retry(read)]`
//! (`payment`) and call the generated methods. Why the attribute is on the adapter and never on
//! the generated client: see that module's docs.
//!
//! The demo starts the in-process gateway on `127.0.0.1` with no random faults and scripts
//! these, printing what the gateway received for each:
//!
//! 1. a charge answered `503` (`Retry-After: 1`), then `500`, then charged: retried twice with
//!    the same key, one charge;
//! 2. a charge whose response is lost after the charge: retried with the same key, the gateway
//!    replays the first payment, one charge;
//! 3. a charge of 0, refused with `422`: a contract error, not retried (one request);
//! 4. a status read whose connection is reset, then answered: retried once;
//! 5. a status read of an unknown payment, `404`: not retried.
//!
//! It exits non-zero if any of these went otherwise.

use std::process::ExitCode;
use std::time::Duration;

use retry_examples::generated_gateway::{GatewayError, Payments};
use retry_fixtures::gateway::{Fault, FaultPlan, Gateway, Request};
use retry_runtime::{Classify, idempotency_key_v5};

/// Each attempt's bound: the gateway answers in microseconds on loopback.
const TIMEOUT: Duration = Duration::from_secs(2);

/// What the gateway recorded for an order: how many requests, their outcomes in order, and how
/// many distinct idempotency keys they carried (1: every attempt sent the same key).
fn received(requests: &[Request]) -> String {
    let outcomes: Vec<String> = requests
        .iter()
        .map(|request| format!("{:?}", request.outcome))
        .collect();
    let mut keys: Vec<&str> = requests.iter().filter_map(|r| r.key.as_deref()).collect();
    keys.dedup();
    format!(
        "{} request(s): {} ({} distinct key(s))",
        requests.len(),
        outcomes.join(", "),
        keys.len()
    )
}

/// An error's status and what `Classify` says of it.
fn verdict(error: &GatewayError) -> String {
    format!(
        "{} (transient: {}, 4xx: {})",
        error.status().map_or("no status".into(), |s| s.to_string()),
        error.is_transient(),
        error.is_client_error()
    )
}

#[tokio::main]
async fn main() -> ExitCode {
    match demo().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn demo() -> Result<bool, Box<dyn std::error::Error>> {
    let gateway = Gateway::start(44, FaultPlan::none()).await?;
    let payments = Payments::new(&gateway.url(), TIMEOUT)?;
    let mut as_expected = true;

    gateway.force(
        "order-1",
        [
            Some(Fault::Unavailable {
                retry_after_secs: 1,
            }),
            Some(Fault::ServerError),
        ],
    );
    let key = idempotency_key_v5("order-1", "charge");
    let payment = payments.charge("order-1", 1_200, key).await?;
    println!(
        "1. charge after 503 + 500: {} → {}",
        payment.payment_id,
        received(&gateway.requests("order-1"))
    );
    as_expected &= gateway.charges("order-1").len() == 1 && gateway.requests("order-1").len() == 3;

    gateway.force("order-2", [Some(Fault::Lost)]);
    let key = idempotency_key_v5("order-2", "charge");
    let payment = payments.charge("order-2", 800, key).await?;
    println!(
        "2. charge whose response was lost: {} → {}",
        payment.payment_id,
        received(&gateway.requests("order-2"))
    );
    as_expected &= gateway.charges("order-2").len() == 1;

    let key = idempotency_key_v5("order-3", "charge");
    let refused = payments.charge("order-3", 0, key).await.unwrap_err();
    println!(
        "3. charge of 0: {} → {}",
        verdict(&refused),
        received(&gateway.requests("order-3"))
    );
    as_expected &= gateway.requests("order-3").len() == 1;

    let paid = gateway.charges("order-1").remove(0);
    gateway.force("order-1", [Some(Fault::Reset)]);
    let found = payments.payment(&paid.payment_id).await?;
    let reads = gateway.requests("order-1").len() - 3;
    println!(
        "4. status read after a reset: {} {} → {reads} GET request(s)",
        found.payment_id, found.status
    );
    as_expected &= reads == 2;

    let missing = payments.payment("pay-999").await.unwrap_err();
    println!("5. status of an unknown payment: {}", verdict(&missing));
    as_expected &= missing.status().map(|s| s.as_u16()) == Some(404);

    let stats = gateway.stats();
    println!(
        "gateway: {} requests, {} charges, {} duplicate charges, {} 4xx retried",
        stats.requests, stats.charges, stats.duplicate_charges, stats.retried_4xx
    );
    as_expected &= stats.duplicate_charges == 0 && stats.retried_4xx == 0;
    gateway.shutdown().await;
    if !as_expected {
        eprintln!("the retries went otherwise than the rules say: see above");
    }
    Ok(as_expected)
}
