//! Hedged reads against a slow tail, on a paused tokio clock (exact and instant): the issue's
//! target table for BENCHMARKS.md, and the latency plot `benches/hedging.svg`.
//!
//! A simulated server (no socket: what is measured is the loop's behaviour, not a network)
//! answers 98 % of calls in 5–15 ms and 2 % in 1 s; 10 000 reads arrive at 200/s. Then a server
//! slow for everyone (every call 200 ms) and a dead one (every call fails transiently in
//! 5–15 ms). Each row has fns (call sites, systems, budgets) of its own, under the defaults:
//! 3 attempts, the default retry budget (20 % of calls + 10/s over 10 s), `hedge_load = 0.05`.
//!
//! Beside ours, tower-resilience 0.13's hedge (issue 45): `HedgeLayer` with a fixed 20 ms delay
//! and at most 2 attempts in flight (the primary and one hedge, as ours), over the same server,
//! its service built once and cloned per request (`oneshot`). It has no percentile delay (the
//! `p95` rows' peer), no retry of failed attempts and no hedge budget (`hedge_load`); it sleeps
//! with tokio, so it runs on the same paused clock. seatbelt 0.11's hedging is not here: its
//! timers run on its own clock (`tick`, read from the wall clock), which a paused tokio clock
//! does not drive, so on this simulation its hedges would fire in real time, not the
//! simulation's.
//!
//! `cargo bench -p retry-benches --bench hedging`

use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use plotters::prelude::*;
use retry_runtime::{Classify, retry};
use tokio::time::{Instant, sleep};
use tower::ServiceExt as _;

const REQUESTS: u32 = 10_000;
const EVERY: Duration = Duration::from_millis(5);

#[derive(Debug, Clone, Copy)]
struct Unavailable;

impl Classify for Unavailable {
    fn is_transient(&self) -> bool {
        true
    }
}

#[derive(Clone, Copy)]
enum Behaviour {
    /// 98 % in 5–15 ms, 2 % in 1 s.
    SlowTail,
    /// Every call 200 ms.
    SlowForEveryone,
    /// Every call fails in 5–15 ms.
    Dead,
}

/// The simulated server: a seeded generator (splitmix64) draws each call's latency.
struct Server {
    behaviour: Behaviour,
    seed: AtomicU64,
    calls: AtomicU32,
}

impl Server {
    fn new(behaviour: Behaviour) -> Arc<Self> {
        Arc::new(Server {
            behaviour,
            seed: AtomicU64::new(0x5eed),
            calls: AtomicU32::new(0),
        })
    }

    fn draw(&self) -> u64 {
        let mut z = self
            .seed
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    async fn call(&self) -> Result<u32, Unavailable> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let r = self.draw();
        let fast = Duration::from_micros(5_000 + (r >> 32) % 10_001);
        match self.behaviour {
            Behaviour::SlowTail if r % 100 < 2 => sleep(Duration::from_secs(1)).await,
            Behaviour::SlowTail => sleep(fast).await,
            Behaviour::SlowForEveryone => sleep(Duration::from_millis(200)).await,
            Behaviour::Dead => {
                sleep(fast).await;
                return Err(Unavailable);
            }
        }
        Ok(0)
    }
}

#[retry(read)]
async fn tail_plain(server: &Server) -> Result<u32, Unavailable> {
    server.call().await
}

#[retry(read, hedge = "p95")]
async fn tail_p95(server: &Server) -> Result<u32, Unavailable> {
    server.call().await
}

#[retry(read, hedge = "20ms")]
async fn tail_20ms(server: &Server) -> Result<u32, Unavailable> {
    server.call().await
}

#[retry(read, hedge = "p95")]
async fn everyone_p95(server: &Server) -> Result<u32, Unavailable> {
    server.call().await
}

#[retry(read, hedge = "20ms")]
async fn everyone_20ms(server: &Server) -> Result<u32, Unavailable> {
    server.call().await
}

#[retry(read)]
async fn dead_plain(server: &Server) -> Result<u32, Unavailable> {
    server.call().await
}

#[retry(read, hedge = "p95")]
async fn dead_p95(server: &Server) -> Result<u32, Unavailable> {
    server.call().await
}

#[retry(read, hedge = "20ms")]
async fn dead_20ms(server: &Server) -> Result<u32, Unavailable> {
    server.call().await
}

/// tower-resilience 0.13's hedge over the server: a 20 ms delay, at most 2 attempts in flight.
fn tower_hedge() -> impl tower::Service<
    Arc<Server>,
    Response = u32,
    Error = tower_resilience::hedge::HedgeError<Unavailable>,
    Future: Send + 'static,
> + Clone
+ Send
+ 'static {
    tower::ServiceBuilder::new()
        .layer(
            tower_resilience::hedge::HedgeLayer::builder()
                .delay(Duration::from_millis(20))
                .max_hedged_attempts(2)
                .build(),
        )
        .service_fn(|server: Arc<Server>| async move { server.call().await })
}

/// A row of tower-resilience's hedge: its service cloned per request.
fn run_tower_hedge(name: &'static str, behaviour: Behaviour) -> Row {
    let hedge = tower_hedge();
    run(name, behaviour, move |server| {
        let hedge = hedge.clone();
        async move { hedge.oneshot(server).await.map_err(|_| Unavailable) }
    })
}

/// One row: the request latencies, sorted, and the server's calls.
struct Row {
    name: &'static str,
    latencies: Vec<Duration>,
    calls: u32,
}

impl Row {
    fn percentile(&self, p: f64) -> Duration {
        let n = self.latencies.len();
        let rank = ((p / 100.0) * n as f64).ceil() as usize;
        self.latencies[rank.clamp(1, n) - 1]
    }

    fn extra(&self) -> f64 {
        f64::from(self.calls) / f64::from(REQUESTS) - 1.0
    }
}

/// 10 000 requests at 200/s through `call`, on a fresh paused runtime.
fn run<F, Fut>(name: &'static str, behaviour: Behaviour, call: F) -> Row
where
    F: Fn(Arc<Server>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<u32, Unavailable>> + Send + 'static,
{
    let server = Server::new(behaviour);
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(REQUESTS as usize)));
    retry_benches::runtime(true).block_on(async {
        let mut tasks = Vec::with_capacity(REQUESTS as usize);
        for _ in 0..REQUESTS {
            let (server, latencies, call) = (server.clone(), latencies.clone(), call.clone());
            tasks.push(tokio::spawn(async move {
                let start = Instant::now();
                let _ = call(server).await;
                latencies.lock().unwrap().push(start.elapsed());
            }));
            sleep(EVERY).await;
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
    let mut latencies = std::mem::take(&mut *latencies.lock().unwrap());
    latencies.sort();
    Row {
        name,
        latencies,
        calls: server.calls.load(Ordering::Relaxed),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1_000.0)
}

fn main() {
    let before = retry_benches::uptime();
    let tail = [
        run("no hedge", Behaviour::SlowTail, |s| async move {
            tail_plain(&s).await
        }),
        run("`hedge = \"p95\"`", Behaviour::SlowTail, |s| async move {
            tail_p95(&s).await
        }),
        run("`hedge = \"20ms\"`", Behaviour::SlowTail, |s| async move {
            tail_20ms(&s).await
        }),
        run_tower_hedge("tower-resilience 0.13 hedge, 20 ms", Behaviour::SlowTail),
    ];
    let everyone = [
        run(
            "`hedge = \"p95\"`",
            Behaviour::SlowForEveryone,
            |s| async move { everyone_p95(&s).await },
        ),
        run(
            "`hedge = \"20ms\"`",
            Behaviour::SlowForEveryone,
            |s| async move { everyone_20ms(&s).await },
        ),
        run_tower_hedge(
            "tower-resilience 0.13 hedge, 20 ms",
            Behaviour::SlowForEveryone,
        ),
    ];
    let dead = [
        run("no hedge", Behaviour::Dead, |s| async move {
            dead_plain(&s).await
        }),
        run("`hedge = \"p95\"`", Behaviour::Dead, |s| async move {
            dead_p95(&s).await
        }),
        run("`hedge = \"20ms\"`", Behaviour::Dead, |s| async move {
            dead_20ms(&s).await
        }),
        run_tower_hedge("tower-resilience 0.13 hedge, 20 ms", Behaviour::Dead),
    ];

    println!("\n### Slow tail: 98 % of calls in 5–15 ms, 2 % in 1 s; 10 000 reads at 200/s\n");
    println!("| fn | p50 ms | p99 ms | p99.9 ms | max ms | server calls | extra calls |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for row in &tail {
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.2} % |",
            row.name,
            ms(row.percentile(50.0)),
            ms(row.percentile(99.0)),
            ms(row.percentile(99.9)),
            ms(row.percentile(100.0)),
            row.calls,
            row.extra() * 100.0
        );
    }
    println!("\n### Slow for everyone: every call 200 ms; 10 000 reads at 200/s\n");
    println!("| fn | p50 ms | p99.9 ms | server calls | extra calls |");
    println!("| --- | --- | --- | --- | --- |");
    for row in &everyone {
        println!(
            "| {} | {} | {} | {} | {:.2} % |",
            row.name,
            ms(row.percentile(50.0)),
            ms(row.percentile(99.9)),
            row.calls,
            row.extra() * 100.0
        );
    }
    println!("\n### Dead server: every call fails in 5–15 ms; 10 000 reads at 200/s\n");
    println!("| fn | server calls | calls per request |");
    println!("| --- | --- | --- |");
    for row in &dead {
        println!(
            "| {} | {} | {:.3} |",
            row.name,
            row.calls,
            f64::from(row.calls) / f64::from(REQUESTS)
        );
    }

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("hedging.svg");
    // The plot keeps ours (three colours); the peer's row is in the table.
    plot(&path, &tail[..3]).expect("the plot");
    println!("\nplot: {}", path.display());
    println!(
        "\nuptime before: {}\nuptime after:  {}",
        before.unwrap_or_default(),
        retry_benches::uptime().unwrap_or_default()
    );
}

/// The latency at each percentile, per fn, on log scales.
fn plot(path: &Path, rows: &[Row]) -> Result<(), Box<dyn std::error::Error>> {
    const PERCENTILES: [f64; 7] = [50.0, 90.0, 95.0, 98.0, 99.0, 99.9, 99.99];
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    // x: the percentile as "nines", -log10(1 − p): 50 % → 0.3, 99.9 % → 3.
    let nines = |p: f64| -(1.0 - p / 100.0).log10();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Slow tail (2 % of calls take 1 s): request latency by percentile",
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.2f64..4.1f64, (3f64..2_000f64).log_scale())?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_desc("percentile")
        .y_desc("latency, ms (log)")
        .x_labels(8)
        .x_label_formatter(&|x| {
            let p = 100.0 * (1.0 - 10f64.powf(-x));
            format!("p{}", (p * 100.0).round() / 100.0)
        })
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    let colours = [
        RGBColor(220, 30, 30),
        RGBColor(30, 60, 220),
        RGBColor(0, 150, 80),
    ];
    for (row, colour) in rows.iter().zip(colours) {
        let points: Vec<(f64, f64)> = PERCENTILES
            .iter()
            .map(|&p| (nines(p), row.percentile(p).as_secs_f64() * 1_000.0))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
            .label(format!(
                "{} (+{:.1} % calls)",
                row.name.replace('`', ""),
                row.extra() * 100.0
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, colour.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    root.present()?;
    Ok(())
}
