//! One test per variant of `progenitor_client::Error`, each built the way a generated client
//! builds it (real sockets on 127.0.0.1 where a connection is involved).

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::time::Duration;

use ::progenitor_client::{Error, ResponseValue};
use ::reqwest::StatusCode;
use ::reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};

use crate::Classify;

fn headers(retry_after: Option<&'static str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(value) = retry_after {
        headers.insert(RETRY_AFTER, HeaderValue::from_static(value));
    }
    headers
}

fn error_response(status: u16, retry_after: Option<&'static str>) -> Error<String> {
    let status = StatusCode::from_u16(status).unwrap();
    Error::ErrorResponse(ResponseValue::new(
        "the documented error body".to_owned(),
        status,
        headers(retry_after),
    ))
}

fn unexpected_response(status: u16, retry_after: Option<&'static str>) -> Error<String> {
    let mut response = ::http::Response::new("");
    *response.status_mut() = StatusCode::from_u16(status).unwrap();
    *response.headers_mut() = headers(retry_after);
    Error::UnexpectedResponse(::reqwest::Response::from(response))
}

/// A server on 127.0.0.1 that answers one connection with `raw` and closes it.
fn one_answer(raw: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        // The request is read to its end first: closing a socket with unread data sends a
        // reset, which the client could see before the answer.
        let mut request = Vec::new();
        let mut byte = [0u8];
        while !request.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
            request.push(byte[0]);
        }
        let _ = stream.write_all(raw.as_bytes());
    });
    url
}

#[test]
fn error_responses_are_judged_by_status_and_retry_after() {
    let unavailable = error_response(503, Some("2"));
    assert!(unavailable.is_transient());
    assert_eq!(unavailable.retry_after(), Some(Duration::from_secs(2)));
    assert!(!unavailable.is_client_error());

    for status in [500, 502, 504] {
        assert!(error_response(status, None).is_transient(), "{status}");
    }
    for status in [400, 401, 404, 408, 409, 422, 501, 505] {
        assert!(!error_response(status, None).is_transient(), "{status}");
    }
    assert!(error_response(404, None).is_client_error());
    assert_eq!(error_response(500, Some("soon")).retry_after(), None);
}

#[test]
fn a_429_is_permanent_but_keeps_its_retry_after() {
    let too_many = error_response(429, Some("3"));
    assert!(!too_many.is_transient());
    assert!(too_many.is_client_error());
    assert_eq!(too_many.retry_after(), Some(Duration::from_secs(3)));
    // What the hand-over and the durable worker read: "come back in 3 s", not a retry.
    assert_eq!(
        crate::classify::Verdict::of(&too_many).asks_to_wait(),
        Some(Duration::from_secs(3))
    );
}

#[test]
fn unexpected_responses_are_judged_by_status() {
    let unavailable = unexpected_response(503, Some("1"));
    assert!(unavailable.is_transient());
    assert_eq!(unavailable.retry_after(), Some(Duration::from_secs(1)));
    let gone = unexpected_response(410, None);
    assert!(!gone.is_transient());
    assert!(gone.is_client_error());
    // A success the document does not list: the call worked, sending it again changes nothing.
    let accepted = unexpected_response(202, None);
    assert!(!accepted.is_transient());
    assert!(!accepted.is_client_error());
}

#[test]
fn invalid_requests_custom_errors_and_bad_payloads_are_permanent() {
    let invalid = Error::<()>::InvalidRequest("amount must be positive".into());
    assert!(!invalid.is_transient());
    assert_eq!(invalid.retry_after(), None);
    assert!(!Error::<()>::Custom("a hook said no".into()).is_transient());
}

#[tokio::test]
async fn a_payload_that_is_not_the_documented_type_is_permanent() {
    let response = ::reqwest::Response::from(::http::Response::new("not json"));
    let error = ResponseValue::<u32>::from_response::<()>(response)
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::InvalidResponsePayload(..)),
        "{error:?}"
    );
    assert!(!error.is_transient());
}

#[tokio::test]
async fn a_refused_connection_is_transient() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The listener is dropped: nothing listens on `port` any more.
    let error: Error = ::reqwest::get(format!("http://127.0.0.1:{port}/"))
        .await
        .unwrap_err()
        .into();
    assert!(matches!(error, Error::CommunicationError(_)), "{error:?}");
    assert!(error.is_transient());
    assert_eq!(error.retry_after(), None);
}

#[test]
fn a_request_that_cannot_be_built_is_permanent() {
    // What a generated method's `.build()?` gives for a bad base URL.
    let error: Error = ::reqwest::Client::new()
        .get("not a url")
        .build()
        .unwrap_err()
        .into();
    assert!(matches!(error, Error::CommunicationError(_)), "{error:?}");
    assert!(!error.is_transient());
}

#[tokio::test]
async fn a_body_cut_short_is_transient() {
    let url = one_answer("HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"amount\":");
    let response = ::reqwest::get(url).await.unwrap();
    let error = ResponseValue::<u32>::from_response::<()>(response)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::ResponseBodyError(_)), "{error:?}");
    assert!(error.is_transient());
}

#[test]
fn an_invalid_upgrade_is_permanent() {
    let error: Error = ::reqwest::Client::new()
        .get("not a url")
        .build()
        .map_err(Error::InvalidUpgrade)
        .unwrap_err();
    assert!(!error.is_transient());
}
