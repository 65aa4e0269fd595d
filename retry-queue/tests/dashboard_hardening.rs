//! The dashboard as an attacker probes it, over real sockets on 127.0.0.1: a client that sends
//! half its headers and stops is cut off, connections are capped, oversized requests are
//! refused with a JSON body and the security headers, and the served OpenAPI document is the
//! committed one (`retry-queue/docs/openapi.json`; `RETRY_QUEUE_BLESS=1` rewrites it).

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::StatusCode;
use retry_queue::dashboard::{self, DashOptions};
use retry_runtime::durable::Queue;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A queue on a fresh SQLite file, and the directory that holds it.
async fn queue() -> (Queue, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let q = Queue::connect(&url).await.expect("SQLite opens a new file");
    (q, dir)
}

/// Serves `q` with `options` on a free port of 127.0.0.1; its address.
async fn serve(q: Queue, mut options: DashOptions) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    options.listen = addr;
    tokio::spawn(dashboard::serve_on(listener, q, options));
    addr
}

/// What the server sent on `stream` until it closed it (a reset counts as closed).
async fn read_all(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes).await;
    String::from_utf8_lossy(&bytes).into_owned()
}

#[tokio::test(flavor = "current_thread")]
async fn a_slow_header_client_is_cut_off_and_connections_are_capped() {
    let (q, _dir) = queue().await;
    let timeout = Duration::from_secs(10);
    let options = DashOptions {
        header_timeout: timeout,
        max_connections: 2,
        ..DashOptions::default()
    };
    // The clock stands still but for timers: the runtime jumps to the next one when every
    // task waits (here, on sockets), so the timeout passes without waiting for it.
    tokio::time::pause();
    let addr = serve(q, options).await;
    let start = tokio::time::Instant::now();
    // Two clients send half their headers and stop: they hold both connection slots.
    let mut slow = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /api/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(stream);
    }
    // A third one, complete, waits for a slot: it is answered once the slow ones are cut off.
    let mut third = TcpStream::connect(addr).await.unwrap();
    third
        .write_all(b"GET /assets/dash.css HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answered = read_all(&mut third).await;
    assert!(answered.starts_with("HTTP/1.1 200 OK"), "{answered}");
    assert!(
        start.elapsed() >= timeout,
        "answered after {:?}: before a slot was free",
        start.elapsed()
    );
    // The slow clients were cut off without an answer to their half request (no handler ran).
    for mut stream in slow {
        let got = read_all(&mut stream).await;
        assert!(!got.contains("200 OK"), "{got}");
    }
    assert!(start.elapsed() < timeout * 2, "{:?}", start.elapsed());
}

#[tokio::test]
async fn oversized_requests_are_refused_with_json_and_the_security_headers() {
    let (q, _dir) = queue().await;
    let addr = serve(q, DashOptions::default()).await;
    let http = reqwest::Client::new();
    let check = |response: reqwest::Response, status: StatusCode| async move {
        assert_eq!(response.status(), status);
        let headers = response.headers().clone();
        assert_eq!(headers["content-type"], "application/json");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(headers["x-frame-options"], "DENY");
        assert!(headers.contains_key("content-security-policy"));
        let text = response.text().await.unwrap();
        let body: Value = serde_json::from_str(&text).expect("a JSON body");
        body["error"].as_str().expect("an error").to_owned()
    };
    // A request target over 8 KiB: 414.
    let long = format!("http://{addr}/api/queues?x={}", "a".repeat(9 * 1024));
    let msg = check(
        http.get(&long).send().await.unwrap(),
        StatusCode::URI_TOO_LONG,
    )
    .await;
    assert!(msg.contains("at most 8192"), "{msg}");
    // More than 64 headers, or more than 16 KiB of them: 431.
    let mut many = http.get(format!("http://{addr}/api/queues"));
    for i in 0..70 {
        many = many.header(format!("x-h{i}"), "1");
    }
    let msg = check(
        many.send().await.unwrap(),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
    )
    .await;
    assert!(msg.contains("at most 64 headers"), "{msg}");
    let big = http
        .get(format!("http://{addr}/api/queues"))
        .header("x-big", "b".repeat(20 * 1024));
    check(
        big.send().await.unwrap(),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
    )
    .await;
    // A body over 1 MiB: 413.
    let body = format!(
        "{{\"action\":\"run\",\"ids\":[\"{}\"]}}",
        "i".repeat(1_100_000)
    );
    let msg = check(
        http.post(format!("http://{addr}/api/queues/q/tasks/batch"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap(),
        StatusCode::PAYLOAD_TOO_LARGE,
    )
    .await;
    assert!(msg.contains("larger than 1048576 bytes"), "{msg}");
}

#[tokio::test]
async fn the_served_openapi_document_is_the_committed_one() {
    let (q, _dir) = queue().await;
    let addr = serve(q, DashOptions::default()).await;
    let response = reqwest::get(format!("http://{addr}/api/openapi.json"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/json");
    let served = response.text().await.unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.json");
    if std::env::var_os("RETRY_QUEUE_BLESS").is_some() {
        std::fs::write(path, &served).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        served == committed,
        "retry-queue/docs/openapi.json differs from the served document: rerun with \
         RETRY_QUEUE_BLESS=1 and review the diff"
    );
    // Every route of the API is in it, each refusal described as `{"error"}`.
    let doc: Value = serde_json::from_str(&served).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    for route in [
        "/api/openapi.json",
        "/api/queues",
        "/api/workers",
        "/api/schedulers",
        "/api/queues/{queue}/tasks",
        "/api/queues/{queue}/errors",
        "/api/queues/{queue}/history",
        "/api/queues/{queue}/systems",
        "/api/queues/{queue}/kinds",
        "/api/queues/{queue}/tasks/{id}",
        "/api/queues/{queue}/task",
        "/api/queues/{queue}/tasks/batch",
        "/api/queues/{queue}/tasks/{id}/{action}",
        "/api/queues/{queue}/task/{action}",
        "/api/queues/{queue}/run-all",
        "/api/queues/{queue}/delete-all",
        "/api/queues/{queue}/pause",
        "/api/queues/{queue}/unpause",
    ] {
        let item = paths
            .get(route)
            .unwrap_or_else(|| panic!("{route} missing"));
        for operation in item.as_object().unwrap().values() {
            assert_eq!(
                operation["responses"]["400"]["content"]["application/json"]["schema"]["$ref"],
                "#/components/schemas/ErrorBody",
                "{route}"
            );
        }
    }
    assert_eq!(paths.len(), 18, "{:?}", paths.keys().collect::<Vec<_>>());
}

#[tokio::test]
async fn a_queue_named_dots_is_reached_through_the_tilde_segment() {
    let (q, _dir) = queue().await;
    let dots = q.clone().named("..");
    dots.enqueue(retry_runtime::durable::Task::new("k", &1).task_id("d1"))
        .await
        .unwrap();
    let tilde = q.clone().named("~");
    tilde
        .enqueue(retry_runtime::durable::Task::new("k", &2).task_id("t1"))
        .await
        .unwrap();
    let addr = serve(q, DashOptions::default()).await;
    let http = reqwest::Client::new();
    let get = |path: String| {
        let req = http.get(format!("http://{addr}{path}"));
        async move {
            let response = req.send().await.unwrap();
            let status = response.status();
            let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
            (status, body)
        }
    };
    // `..` as the `queue` parameter after the segment `~`.
    let (status, body) = get("/api/queues/~/tasks?queue=..&state=pending".into()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["tasks"][0]["id"], "d1");
    assert_eq!(body["stats"]["queue"], "..");
    let paused = http
        .post(format!("http://{addr}/api/queues/~/pause?queue=.."))
        .send()
        .await
        .unwrap();
    assert_eq!(paused.status(), StatusCode::OK);
    let (_, overview) = get("/api/queues".into()).await;
    let row = overview["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["queue"] == "..")
        .cloned()
        .unwrap();
    assert_eq!(row["paused"], true);
    // The segment `~` alone is the queue named `~`; after another segment, `queue` is ignored.
    let (_, body) = get("/api/queues/~/tasks?state=pending".into()).await;
    assert_eq!(body["tasks"][0]["id"], "t1");
    let (_, body) = get("/api/queues/~/tasks?state=pending&queue=..".into()).await;
    assert_eq!(body["tasks"][0]["id"], "d1");
    let (_, body) = get("/api/queues/default/tasks?state=pending&queue=..".into()).await;
    assert_eq!(body["tasks"], serde_json::json!([]));
}

#[tokio::test]
async fn weak_tokens_are_refused_at_start() {
    let (q, _dir) = queue().await;
    for (token, distinct) in [("aaaaaaaaaaaaaaaa", 1), ("abcabcabcabcabcabc", 3)] {
        let options = DashOptions {
            token: Some(token.into()),
            ..DashOptions::default()
        };
        let refused = dashboard::serve(q.clone(), options).await;
        match refused {
            Err(dashboard::DashError::WeakToken { distinct: d }) => assert_eq!(d, distinct),
            other => panic!("{token}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_slow_body_is_refused_with_408() {
    let (q, _dir) = queue().await;
    tokio::time::pause();
    let addr = serve(q, DashOptions::default()).await;
    let start = tokio::time::Instant::now();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // 100 bytes announced, 10 sent, then nothing.
    stream
        .write_all(
            b"POST /api/queues/q/tasks/batch HTTP/1.1\r\nHost: 127.0.0.1\r\n\
              Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"action\":",
        )
        .await
        .unwrap();
    let answer = read_all(&mut stream).await;
    assert!(
        answer.starts_with("HTTP/1.1 408 Request Timeout"),
        "{answer}"
    );
    assert!(answer.contains("application/json"), "{answer}");
    assert!(
        answer.contains("the body took longer than 10 s"),
        "{answer}"
    );
    assert!(
        start.elapsed() >= dashboard::BODY_TIMEOUT,
        "{:?}",
        start.elapsed()
    );
}
