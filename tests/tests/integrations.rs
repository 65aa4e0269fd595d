//! The optional integrations against live peers: real `reqwest` errors produced by a tiny
//! server on 127.0.0.1, a real `failsafe` circuit breaker, and `#[retry]` adapters over both.
//!
//! Every server handles a fixed script of connections, one at a time, and records each request
//! head, so the tests count requests on the server side. Real clock, tiny delays, no wall-clock
//! assertions.

use std::error::Error;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use failsafe::CircuitBreaker;
use failsafe::backoff::constant;
use failsafe::failure_policy::consecutive_failures;
use retry_runtime::http::{StatusError, error_for_status};
use retry_runtime::{Classify, IdempotencyKey, idempotency_key_v5, retry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server does with one connection, after reading the request head.
#[derive(Clone, Copy, Debug)]
enum Reply {
    /// A complete response with `Connection: close`.
    Respond {
        status: u16,
        headers: &'static [(&'static str, &'static str)],
        body: &'static str,
    },
    /// Never answers; the connection stays open until the test ends.
    Silent,
    /// Closes the connection without sending a byte.
    Close,
    /// Sends the head and 10 of the 100 body bytes it announced, then closes.
    CloseMidBody,
    /// Resets the connection (RST).
    Reset,
}

const fn status(status: u16) -> Reply {
    Reply::Respond {
        status,
        headers: &[],
        body: "",
    }
}

const OK_PAID: Reply = Reply::Respond {
    status: 200,
    headers: &[],
    body: "paid",
};

const UNAVAILABLE_RETRY_AFTER_2: Reply = Reply::Respond {
    status: 503,
    headers: &[("Retry-After", "2")],
    body: "",
};

struct Server {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Serves `script`, one connection per reply, in order; then stops listening.
    async fn start(script: &[Reply]) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script = script.to_vec();
        let seen = Arc::clone(&requests);
        tokio::spawn(async move {
            for reply in script {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let head = read_head(&mut stream).await;
                seen.lock().unwrap().push(head);
                answer(stream, reply).await;
            }
        });
        Server { addr, requests }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// The request head, up to the blank line (at most 16 KiB; the tests send no bodies).
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

async fn answer(mut stream: TcpStream, reply: Reply) {
    match reply {
        Reply::Respond {
            status,
            headers,
            body,
        } => {
            let mut response = format!(
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                response.push_str(&format!("{name}: {value}\r\n"));
            }
            response.push_str("\r\n");
            response.push_str(body);
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
        Reply::Silent => {
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        Reply::Close => {
            let _ = stream.shutdown().await;
        }
        Reply::CloseMidBody => {
            let head = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n";
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(b"0123456789").await;
            let _ = stream.flush().await;
            let _ = stream.shutdown().await;
        }
        Reply::Reset => {
            stream.set_zero_linger().unwrap();
            drop(stream);
        }
    }
}

/// A client that never waits longer than 5 s, so that no test can hang.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// The kinds of the `io::Error`s in `error`'s source chain.
fn io_kinds(error: &(dyn Error + 'static)) -> Vec<io::ErrorKind> {
    std::iter::successors(Some(error), |&e| e.source())
        .take(16)
        .filter_map(|e| e.downcast_ref::<io::Error>().map(io::Error::kind))
        .collect()
}

// ---- reqwest::Error from real failures -------------------------------------------------------

#[tokio::test]
async fn a_server_that_never_answers_times_out_transient() {
    let server = Server::start(&[Reply::Silent]).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let error = client.get(server.url("/")).send().await.unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    assert!(error.is_transient());
    assert_eq!(error.retry_after(), None);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_port_with_nothing_listening_is_a_transient_connect_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let error = client()
        .get(format!("http://{addr}/"))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_connect(), "{error:?}");
    assert!(io_kinds(&error).contains(&io::ErrorKind::ConnectionRefused));
    assert!(error.is_transient());
}

#[tokio::test]
async fn a_reset_connection_is_transient() {
    let server = Server::start(&[Reply::Reset]).await;
    let error = client().get(server.url("/")).send().await.unwrap_err();
    assert!(error.is_request(), "{error:?}");
    assert!(!error.is_connect() && !error.is_timeout(), "{error:?}");
    assert_eq!(io_kinds(&error), [io::ErrorKind::ConnectionReset]);
    assert!(error.is_transient());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_connection_closed_before_the_response_is_transient() {
    let server = Server::start(&[Reply::Close]).await;
    let error = client().get(server.url("/")).send().await.unwrap_err();
    assert!(error.is_request(), "{error:?}");
    // No io::Error in the chain: hyper's "incomplete message" alone makes it transient.
    assert_eq!(io_kinds(&error), []);
    assert!(error.is_transient(), "{error:?}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_body_cut_short_is_transient() {
    let server = Server::start(&[Reply::CloseMidBody]).await;
    let response = client().get(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let error = response.bytes().await.unwrap_err();
    // reqwest reports it as a decode error over a body error over hyper's unexpected end of
    // stream: transient all the same.
    assert!(error.is_decode(), "{error:?}");
    let body = error.source().unwrap().downcast_ref::<reqwest::Error>();
    assert!(body.is_some_and(reqwest::Error::is_body), "{error:?}");
    assert_eq!(io_kinds(&error), [io::ErrorKind::UnexpectedEof]);
    assert!(error.is_transient());
    assert!(body.unwrap().is_transient());
}

#[tokio::test]
async fn an_invalid_url_is_a_permanent_builder_error() {
    for url in ["not a url", "http://", "ftp://127.0.0.1/"] {
        let error = client().get(url).send().await.unwrap_err();
        assert!(error.is_builder(), "{url}: {error:?}");
        assert!(!error.is_transient(), "{url}");
    }
}

#[tokio::test]
async fn a_redirect_loop_is_permanent() {
    let to_self = Reply::Respond {
        status: 302,
        headers: &[("Location", "/again")],
        body: "",
    };
    let server = Server::start(&[to_self; 3]).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::limited(2))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let error = client.get(server.url("/")).send().await.unwrap_err();
    assert!(error.is_redirect(), "{error:?}");
    assert!(!error.is_transient());
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn reqwest_status_errors_follow_the_status_rules() {
    let server = Server::start(&[status(503), status(404), status(429), status(502)]).await;
    let client = client();
    let mut verdicts = Vec::new();
    for _ in 0..4 {
        let response = client.get(server.url("/")).send().await.unwrap();
        let error = response.error_for_status().unwrap_err();
        verdicts.push((error.status().unwrap().as_u16(), error.is_transient()));
        assert_eq!(error.retry_after(), None);
    }
    assert_eq!(
        verdicts,
        [(503, true), (404, false), (429, false), (502, true)]
    );
}

// ---- retry_runtime::http::error_for_status -------------------------------------------------

#[tokio::test]
async fn error_for_status_gives_exact_status_errors() {
    let too_many = Reply::Respond {
        status: 429,
        headers: &[("Retry-After", "7")],
        body: "",
    };
    let garbage_hint = Reply::Respond {
        status: 503,
        headers: &[("Retry-After", "soon")],
        body: "",
    };
    let script = [
        UNAVAILABLE_RETRY_AFTER_2,
        status(404),
        too_many,
        status(501),
        garbage_hint,
        OK_PAID,
    ];
    let server = Server::start(&script).await;
    let client = client();
    let get = || async { error_for_status(client.get(server.url("/")).send().await.unwrap()) };

    let unavailable = get().await.unwrap_err();
    assert_eq!(
        unavailable,
        StatusError {
            status: 503,
            retry_after: Some(Duration::from_secs(2))
        }
    );
    assert!(unavailable.is_transient());
    assert_eq!(unavailable.retry_after(), Some(Duration::from_secs(2)));
    assert_eq!(
        unavailable.to_string(),
        "HTTP 503 Service Unavailable, retry after 2s"
    );

    let not_found = get().await.unwrap_err();
    assert_eq!(
        not_found,
        StatusError {
            status: 404,
            retry_after: None
        }
    );
    assert!(!not_found.is_transient());

    let too_many = get().await.unwrap_err();
    assert_eq!(
        too_many,
        StatusError {
            status: 429,
            retry_after: Some(Duration::from_secs(7))
        }
    );
    assert!(
        !too_many.is_transient(),
        "R-RES-RE-X2: a 429 is not retried"
    );

    let not_implemented = get().await.unwrap_err();
    assert_eq!(
        not_implemented,
        StatusError {
            status: 501,
            retry_after: None
        }
    );
    assert!(!not_implemented.is_transient());

    let garbage = get().await.unwrap_err();
    assert_eq!(
        garbage,
        StatusError {
            status: 503,
            retry_after: None
        }
    );

    let ok = get().await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.text().await.unwrap(), "paid");
    assert_eq!(server.requests().len(), 6);
}

#[tokio::test]
async fn error_for_status_keeps_a_redirect_that_was_not_followed() {
    let moved = Reply::Respond {
        status: 301,
        headers: &[("Location", "/elsewhere")],
        body: "",
    };
    let server = Server::start(&[moved]).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let response = error_for_status(client.get(server.url("/")).send().await.unwrap()).unwrap();
    assert_eq!(response.status(), 301);
}

// ---- failsafe ----------------------------------------------------------------------------------

#[test]
fn an_open_breaker_rejects_and_the_rejection_is_not_transient() {
    let breaker = failsafe::Config::new()
        .failure_policy(consecutive_failures(1, constant(Duration::from_secs(60))))
        .build();

    let first = breaker
        .call(|| Err::<(), _>(StatusError::new(503, Some("2"))))
        .unwrap_err();
    assert!(matches!(first, failsafe::Error::Inner(_)));
    assert!(first.is_transient());
    assert_eq!(first.retry_after(), Some(Duration::from_secs(2)));

    let ran = AtomicU32::new(0);
    let rejected = breaker
        .call(|| {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok::<(), StatusError>(())
        })
        .unwrap_err();
    assert!(matches!(rejected, failsafe::Error::Rejected));
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "an open breaker runs nothing"
    );
    assert!(!rejected.is_transient(), "R-RES-RE-X4");
    assert_eq!(rejected.retry_after(), None);

    // Erased, it keeps its verdict.
    let erased: Box<dyn Error + Send + Sync> = Box::new(rejected);
    assert!(!erased.is_transient());
    let erased = anyhow::Error::new(failsafe::Error::<StatusError>::Rejected).context("charge");
    assert!(!erased.is_transient());
}

/// A blocking read through a breaker that opens after two consecutive failures.
#[retry(read, attempts = 5, delay = "1ms", jitter = "none")]
fn status_through_breaker(
    breaker: &impl CircuitBreaker,
    attempts: &AtomicU32,
    calls: &AtomicU32,
) -> Result<&'static str, failsafe::Error<StatusError>> {
    attempts.fetch_add(1, Ordering::SeqCst);
    breaker.call(|| {
        calls.fetch_add(1, Ordering::SeqCst);
        Err(StatusError::new(503, None))
    })
}

#[test]
fn retry_stops_at_the_breaker_rejection() {
    let breaker = failsafe::Config::new()
        .failure_policy(consecutive_failures(2, constant(Duration::from_secs(60))))
        .build();
    let (attempts, calls) = (AtomicU32::new(0), AtomicU32::new(0));
    let error = status_through_breaker(&breaker, &attempts, &calls).unwrap_err();
    assert!(matches!(error, failsafe::Error::Rejected), "{error:?}");
    // Two 503s (transient, retried) opened the breaker; the third attempt was rejected and not
    // retried, though two attempts were left.
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

// ---- #[retry] adapters over reqwest ------------------------------------------------------------

#[retry(read, delay = "1ms", jitter = "none")]
async fn payment_status(client: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let response = client.get(url).send().await?;
    let response = error_for_status(response)?;
    Ok(response.text().await?)
}

#[tokio::test]
async fn a_503_then_200_succeeds_on_attempt_2() {
    let server = Server::start(&[status(503), OK_PAID]).await;
    let paid = payment_status(&client(), &server.url("/payments/42")).await;
    assert_eq!(paid.unwrap(), "paid");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.starts_with("GET /payments/42 ")));
}

#[tokio::test]
async fn a_404_is_requested_once() {
    let server = Server::start(&[status(404), OK_PAID]).await;
    let error = payment_status(&client(), &server.url("/payments/42"))
        .await
        .unwrap_err();
    assert_eq!(
        error.downcast_ref::<StatusError>(),
        Some(&StatusError {
            status: 404,
            retry_after: None
        })
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn three_503s_exhaust_the_attempts_and_return_the_last() {
    let last = Reply::Respond {
        status: 503,
        headers: &[("Retry-After", "0")],
        body: "",
    };
    let server = Server::start(&[status(503), status(503), last, OK_PAID]).await;
    let error = payment_status(&client(), &server.url("/"))
        .await
        .unwrap_err();
    assert_eq!(
        error.downcast_ref::<StatusError>(),
        Some(&StatusError {
            status: 503,
            retry_after: Some(Duration::ZERO)
        })
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_retry_after_beyond_max_delay_gives_up_at_once() {
    let later = Reply::Respond {
        status: 503,
        headers: &[("Retry-After", "60")],
        body: "",
    };
    let server = Server::start(&[later, OK_PAID]).await;
    let error = payment_status(&client(), &server.url("/"))
        .await
        .unwrap_err();
    assert_eq!(
        error.downcast_ref::<StatusError>().map(|e| e.retry_after),
        Some(Some(Duration::from_secs(60)))
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn broken_connections_are_retried_through_anyhow() {
    let server = Server::start(&[Reply::Reset, Reply::Close, OK_PAID]).await;
    let paid = payment_status(&client(), &server.url("/")).await;
    assert_eq!(paid.unwrap(), "paid");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_body_cut_short_is_retried() {
    let server = Server::start(&[Reply::CloseMidBody, OK_PAID]).await;
    let paid = payment_status(&client(), &server.url("/")).await;
    assert_eq!(paid.unwrap(), "paid");
    assert_eq!(server.requests().len(), 2);
}

#[retry(write, idempotency_key = key, delay = "1ms", jitter = "none")]
async fn register(
    client: &reqwest::Client,
    url: &str,
    key: &uuid::Uuid,
) -> Result<String, Box<dyn Error + Send + Sync>> {
    let response = client
        .post(url)
        .header("Idempotency-Key", key.to_string())
        .send()
        .await?;
    let response = error_for_status(response)?;
    Ok(response.text().await?)
}

#[tokio::test]
async fn a_keyed_write_sends_the_same_v5_key_on_every_attempt() {
    let server = Server::start(&[status(503), OK_PAID]).await;
    let key = idempotency_key_v5("order-42", "register");
    let registered = register(&client(), &server.url("/orders"), &key).await;
    assert_eq!(registered.unwrap(), "paid");
    let expected = format!("idempotency-key: {key}\r\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert!(request.starts_with("POST /orders "), "{request}");
        assert!(
            request.to_ascii_lowercase().contains(&expected),
            "{request}"
        );
    }
}

#[tokio::test]
async fn a_write_with_a_blank_v5_key_runs_once() {
    let server = Server::start(&[status(503), OK_PAID]).await;
    let key = idempotency_key_v5(" ", "register");
    assert!(key.is_blank());
    let error = register(&client(), &server.url("/orders"), &key)
        .await
        .unwrap_err();
    assert_eq!(
        error.downcast_ref::<StatusError>(),
        Some(&StatusError::new(503, None))
    );
    assert_eq!(server.requests().len(), 1);
}
