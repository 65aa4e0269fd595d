// RetryLayer must send a request body again: a streaming body (hyper's `Incoming`) is refused at
// compile time, with a note that says to buffer it.
use std::convert::Infallible;
use std::future::Ready;
use std::task::{Context, Poll};

use hyper::body::Incoming;
use retry_runtime::tower::RetryLayer;
use tower_layer::Layer as _;
use tower_service::Service;

#[derive(Clone)]
struct Proxy;

impl Service<http::Request<Incoming>> for Proxy {
    type Response = http::Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<http::Response<String>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<Incoming>) -> Self::Future {
        std::future::ready(Ok(http::Response::new(String::new())))
    }
}

fn forward(request: http::Request<Incoming>) {
    let mut service = RetryLayer::new("upstream").layer(Proxy);
    let _ = service.call(request);
}

fn main() {
    let _ = forward;
}
