//! Hedged reads against a server with a slow tail.
//!
//! `cargo run --example hedging` starts a server on 127.0.0.1 that answers 98 % of requests in
//! 5–15 ms and 2 % in 1 s, sends it 2 000 reads at 400/s through `#[retry(read)]`, then the
//! same through `#[retry(read, hedge = "p95")]`, and prints p50, p99, p99.9 and the extra
//! requests each made. Real sockets and a real clock: figures vary a little between runs (the
//! exact, paused-clock table is `cargo bench -p retry-benches --bench hedging`).

use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use retry_runtime::{Classify, retry};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, sleep, timeout};

const READS: u32 = 2_000;
const EVERY: Duration = Duration::from_micros(2_500);
/// The server stops after this many connections (the run needs at most about 1.25 × READS).
const MAX_CONNECTIONS: u32 = 2 * READS;

/// The server: one byte in, one byte out, after a latency with a slow tail. Counts requests.
struct Server {
    requests: AtomicU32,
    seed: AtomicU64,
}

impl Server {
    /// 98 % in 5–15 ms, 2 % in 1 s, from a seeded generator (splitmix64).
    fn latency(&self) -> Duration {
        let mut z = self
            .seed
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        if z % 100 < 2 {
            Duration::from_secs(1)
        } else {
            Duration::from_micros(5_000 + (z >> 32) % 10_001)
        }
    }

    async fn serve(self: Arc<Self>, listener: TcpListener) {
        for _ in 0..MAX_CONNECTIONS {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let server = self.clone();
            tokio::spawn(async move {
                let mut byte = [0u8];
                if stream.read_exact(&mut byte).await.is_ok() {
                    server.requests.fetch_add(1, Ordering::Relaxed);
                    sleep(server.latency()).await;
                    let _ = stream.write_all(&byte).await;
                }
            });
        }
    }
}

/// A failed request: a refused or broken connection is worth another attempt.
#[derive(Debug)]
struct Broken;

impl From<io::Error> for Broken {
    fn from(_: io::Error) -> Self {
        Broken
    }
}

impl Classify for Broken {
    fn is_transient(&self) -> bool {
        true
    }
}

async fn request(addr: std::net::SocketAddr) -> Result<(), Broken> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(b"?").await?;
    let mut byte = [0u8];
    stream.read_exact(&mut byte).await?;
    Ok(())
}

#[retry(read, system = "demo-plain")]
async fn plain(addr: std::net::SocketAddr) -> Result<(), Broken> {
    request(addr).await
}

#[retry(read, hedge = "p95", system = "demo-hedged")]
async fn hedged(addr: std::net::SocketAddr) -> Result<(), Broken> {
    request(addr).await
}

/// Sends the reads through `call`; the sorted latencies and the server's requests.
async fn run<F, Fut>(call: F) -> (Vec<Duration>, u32)
where
    F: Fn(std::net::SocketAddr) -> Fut + Copy + Send + 'static,
    Fut: Future<Output = Result<(), Broken>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a local port");
    let addr = listener.local_addr().expect("its address");
    let server = Arc::new(Server {
        requests: AtomicU32::new(0),
        seed: AtomicU64::new(0x5eed),
    });
    let serving = tokio::spawn(server.clone().serve(listener));
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(READS as usize)));
    let mut tasks = Vec::with_capacity(READS as usize);
    let mut next = Instant::now();
    for _ in 0..READS {
        let latencies = latencies.clone();
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let ok = call(addr).await.is_ok();
            if ok {
                latencies.lock().unwrap().push(start.elapsed());
            }
        }));
        next += EVERY;
        tokio::time::sleep_until(next).await;
    }
    for task in tasks {
        let _ = timeout(Duration::from_secs(10), task).await;
    }
    serving.abort();
    let mut latencies = std::mem::take(&mut *latencies.lock().unwrap());
    latencies.sort();
    (latencies, server.requests.load(Ordering::Relaxed))
}

fn percentile(sorted: &[Duration], p: f64) -> String {
    if sorted.is_empty() {
        return "–".into();
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let d = sorted[rank.clamp(1, sorted.len()) - 1];
    format!("{:.1} ms", d.as_secs_f64() * 1_000.0)
}

#[tokio::main]
async fn main() {
    println!(
        "server on 127.0.0.1: 98 % of requests in 5–15 ms, 2 % in 1 s; {READS} reads at {}/s\n",
        Duration::from_secs(1).as_micros() / EVERY.as_micros()
    );
    println!(
        "{:<38} {:>9} {:>9} {:>9} {:>8} {:>12}",
        "", "p50", "p99", "p99.9", "ok", "extra load"
    );
    let rows = [
        ("#[retry(read)]", run(plain).await),
        ("#[retry(read, hedge = \"p95\")]", run(hedged).await),
    ];
    for (name, (latencies, requests)) in rows {
        println!(
            "{name:<38} {:>9} {:>9} {:>9} {:>8} {:>11.1}%",
            percentile(&latencies, 50.0),
            percentile(&latencies, 99.0),
            percentile(&latencies, 99.9),
            latencies.len(),
            (f64::from(requests) / f64::from(READS) - 1.0) * 100.0
        );
    }
}
