use retry_benches::poll_once;
use retry_runtime::{Breaker, Bulkhead, Classify, Rejected, retry, set_breaker, set_bulkhead};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Debug)]
enum E {
    U,
    R(#[allow(dead_code)] Rejected),
}
impl From<Rejected> for E {
    fn from(r: Rejected) -> Self {
        E::R(r)
    }
}
impl Classify for E {
    fn is_transient(&self) -> bool {
        matches!(self, E::U)
    }
}
struct S(AtomicU64);
impl S {
    async fn call(&self) -> Result<u64, E> {
        Ok(self.0.fetch_add(1, Relaxed))
    }
}
#[retry(read, system = "c-plain")]
async fn plain(s: &S) -> Result<u64, E> {
    s.call().await
}
#[retry(read, system = "c-breaker", protect)]
async fn breaker(s: &S) -> Result<u64, E> {
    s.call().await
}
#[retry(read, system = "c-both", protect)]
async fn both(s: &S) -> Result<u64, E> {
    s.call().await
}
async fn undecorated(s: &S) -> Result<u64, E> {
    s.call().await
}
fn main() {
    set_breaker("c-breaker", Breaker::new());
    set_breaker("c-both", Breaker::new());
    set_bulkhead("c-both", Bulkhead::new(1 << 20));
    let which = std::env::args().nth(1).unwrap();
    let n: u64 = std::env::args().nth(2).unwrap().parse().unwrap();
    let s = S(AtomicU64::new(0));
    for _ in 0..n {
        let _ = match which.as_str() {
            "plain" => poll_once(|| plain(black_box(&s))),
            "breaker" => poll_once(|| breaker(black_box(&s))),
            "both" => poll_once(|| both(black_box(&s))),
            _ => poll_once(|| undecorated(black_box(&s))),
        };
    }
}
