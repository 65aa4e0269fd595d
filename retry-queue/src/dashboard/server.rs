//! The dashboard's own HTTP/1.1 server (what [`serve_on`](super::serve_on) runs): one task a
//! connection, at most [`Limits::max_connections`] at once (the next ones wait in the
//! listener's backlog), each cut off when a request's headers take longer than
//! [`Limits::header_timeout`] to arrive (an idle keep-alive connection too). Its parser's own
//! limits are above those of [`limits`](super::limits), which answer as JSON. Every request
//! carries its client's address (`ConnectInfo<SocketAddr>`), which the token's lock-out
//! counts by.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower_service::Service;

/// How long a request's headers may take to arrive by default: 10 s.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How many connections are served at once by default: 256.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// The server's limits (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) header_timeout: Duration,
    pub(crate) max_connections: usize,
}

/// Serves `app` on `listener` until accepting fails for good.
pub(crate) async fn run(listener: TcpListener, app: Router, limits: Limits) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return Ok(());
        };
        let (stream, client) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of file descriptors and the like: wait a little rather than spin.
            Err(e) if is_transient(&e) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        let app = app.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo(client));
                let mut app = app.clone();
                async move {
                    Ok::<Response, Infallible>(app.call(req.map(Body::new)).await.into_response())
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                // Above the guard's own limits, so that those answer as JSON.
                .max_buf_size(256 * 1024)
                .max_headers(512)
                .serve_connection(TokioIo::new(stream), service);
            // A client gone or cut off ends its connection: nothing to report.
            let _ = connection.await;
            drop(slot);
        });
    }
}

fn is_transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted | WouldBlock
    ) || e.raw_os_error().is_some()
}
