//! The dashboard's own HTTP/1.1 server (what [`serve_on`](super::serve_on) runs): one task a
//! connection, at most [`Limits::max_connections`] at once (the next ones wait in the
//! listener's backlog), at most [`Limits::max_connections_per_address`] of them from one
//! client address (the next ones answered 503 and closed: [`shares`](super::shares)), each cut
//! off when a request's headers take longer than [`Limits::header_timeout`] to arrive (an
//! idle keep-alive connection too) or when writing its answer stalls for
//! [`Limits::write_timeout`] ([`write_deadline`](super::write_deadline)). Its parser's own
//! limits are above those of [`limits`](super::limits), which answer as JSON. Every request
//! carries its client's address (`ConnectInfo<SocketAddr>`), which the token's lock-out
//! counts by.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower_service::Service;

use super::shares::Shares;
use super::write_deadline::WriteDeadline;

/// How long a request's headers may take to arrive by default: 10 s.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How many connections are served at once by default: 256.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// How many of them one client address (an IPv4 address, an IPv6 /64) may hold by default:
/// 64, a quarter.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 64;
/// How long writing an answer may stall (the client reading none of it) by default: 10 s.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a connection over its address's share is answered before it is closed.
const OVER_SHARE: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
    Content-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n\
    Content-Length: 63\r\n\r\n\
    {\"error\":\"too many connections from this address: retry later\"}";

/// The server's limits (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) header_timeout: Duration,
    pub(crate) write_timeout: Duration,
    pub(crate) max_connections: usize,
    pub(crate) max_connections_per_address: usize,
}

/// Serves `app` on `listener` until accepting fails for good.
pub(crate) async fn run(listener: TcpListener, app: Router, limits: Limits) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let shares = Shares::new(limits.max_connections_per_address);
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
        let Some(share) = shares.take(client.ip()) else {
            // Best effort, without waiting: the client may not read it.
            let _ = stream.try_write(OVER_SHARE);
            continue;
        };
        let app = app.clone();
        tokio::spawn(async move {
            serve_connection(stream, client, app, limits).await;
            drop((slot, share));
        });
    }
}

/// Serves one connection until it ends, is cut off, or its client goes.
async fn serve_connection(stream: TcpStream, client: SocketAddr, app: Router, limits: Limits) {
    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(client));
        let mut app = app.clone();
        async move { Ok::<Response, Infallible>(app.call(req.map(Body::new)).await.into_response()) }
    });
    let io = TokioIo::new(WriteDeadline::new(stream, limits.write_timeout));
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        // Above the guard's own limits, so that those answer as JSON.
        .max_buf_size(256 * 1024)
        .max_headers(512)
        .serve_connection(io, service);
    // A client gone or cut off ends its connection: nothing to report.
    let _ = connection.await;
}

fn is_transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted | WouldBlock
    ) || e.raw_os_error().is_some()
}

#[cfg(test)]
mod tests {
    use super::OVER_SHARE;

    #[test]
    fn the_over_share_answer_is_a_complete_json_answer() {
        let text = std::str::from_utf8(OVER_SHARE).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("Content-Length: {}", body.len())),
            "{head}"
        );
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(json["error"].is_string());
    }
}
