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

/// The load tests below run one at a time: each measures how fast an operator is served.
static LOAD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The token of the load tests' dashboards.
const TOKEN: &str = "operator-token-0123456789";

/// A connection from `from` (an address of 127.0.0.0/8) to `addr`, with a receive buffer of
/// `recv_buffer` bytes when given (set before connecting, so that the window stays small).
async fn connect_from(
    from: [u8; 4],
    addr: SocketAddr,
    recv_buffer: Option<u32>,
) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from((from, 0)))
        .expect("any 127.x.y.z address is loopback on Linux");
    if let Some(bytes) = recv_buffer {
        socket.set_recv_buffer_size(bytes).unwrap();
    }
    socket.connect(addr).await
}

/// `count` operator requests (a new connection each, from 127.0.0.1, with the token) to
/// `addr`: each must answer 200 within `limit`. Returns the slowest.
async fn operator_requests(addr: SocketAddr, count: usize, limit: Duration) -> Duration {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .local_address(std::net::IpAddr::from([127, 0, 0, 1]))
        .build()
        .unwrap();
    let mut slowest = Duration::ZERO;
    for i in 0..count {
        let start = std::time::Instant::now();
        let answer = tokio::time::timeout(
            limit,
            client
                .get(format!("http://{addr}/api/queues"))
                .bearer_auth(TOKEN)
                .send(),
        )
        .await;
        let took = start.elapsed();
        let status = match answer {
            Ok(Ok(answer)) => answer.status(),
            Ok(Err(e)) => panic!("operator request {i} failed after {took:?}: {e}"),
            Err(_) => panic!("operator request {i} not answered within {limit:?}"),
        };
        assert_eq!(status, StatusCode::OK, "operator request {i}");
        slowest = slowest.max(took);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    slowest
}

/// A token-protected dashboard on 127.0.0.1 with default limits; its address.
async fn protected() -> (SocketAddr, tempfile::TempDir) {
    let (q, dir) = queue().await;
    let options = DashOptions {
        token: Some(TOKEN.into()),
        ..DashOptions::default()
    };
    (serve(q, options).await, dir)
}

/// 200 pipelined requests for the page's script: their answers (about 3 MB) fill any socket
/// buffer of a client that never reads.
fn pipelined_script_requests() -> Vec<u8> {
    b"GET /assets/dash.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".repeat(200)
}

#[tokio::test(flavor = "current_thread")]
async fn a_client_that_never_reads_its_answers_is_cut_off() {
    let (q, _dir) = queue().await;
    let options = DashOptions {
        max_connections: 1,
        ..DashOptions::default()
    };
    // Paused: the runtime jumps to the next timer when every task waits on a socket.
    tokio::time::pause();
    let addr = serve(q, options).await;
    let start = tokio::time::Instant::now();
    let mut never_reads = connect_from([127, 0, 0, 1], addr, Some(2048))
        .await
        .unwrap();
    never_reads
        .write_all(&pipelined_script_requests())
        .await
        .unwrap();
    // The only slot is the never-reading client's until its answer stalls past the limit.
    let mut next = TcpStream::connect(addr).await.unwrap();
    next.write_all(
        b"GET /assets/dash.css HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(120), read_all(&mut next))
        .await
        .expect("the never-reading client still holds the only slot after 120 s");
    assert!(answered.starts_with("HTTP/1.1 200 OK"), "{answered}");
    let waited = start.elapsed();
    println!("served after {waited:?} (paused clock)");
    assert!(waited >= dashboard::DEFAULT_WRITE_TIMEOUT, "{waited:?}");
    // Cut off: it reads fewer than its 200 answers, then the end of the connection.
    let got = read_all(&mut never_reads).await;
    let answers = got.matches("HTTP/1.1 200 OK").count();
    assert!(answers < 200, "{answers} answers: it was not cut off");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_reading_clients_of_one_address_leave_room_for_an_operator() {
    let _one_at_a_time = LOAD.lock().await;
    let (addr, _dir) = protected().await;
    // 256 connections from 127.0.0.2, each with a 2 KB receive buffer, each asking for the
    // script 200 times and never reading.
    let mut hostile = Vec::new();
    for _ in 0..256 {
        let mut stream = connect_from([127, 0, 0, 2], addr, Some(2048))
            .await
            .unwrap();
        // The server may have cut it off already (over its address's share): fine.
        let _ = stream.write_all(&pipelined_script_requests()).await;
        hostile.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let slowest = operator_requests(addr, 10, Duration::from_secs(5)).await;
    println!("256 never-reading connections: the slowest of 10 operator requests took {slowest:?}");
    drop(hostile);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_requests_reopened_when_cut_leave_room_for_an_operator() {
    let _one_at_a_time = LOAD.lock().await;
    let (addr, _dir) = protected().await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let connected = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // 600 clients from 127.0.0.2 send half a request's headers and wait; each one cut off
    // re-opens at once (at most 1 000 times, and until the operator is done). They run on a
    // runtime of their own, on their own thread, as another machine's would: not in the
    // server's.
    let (hostile_stop, hostile_connected) = (stop.clone(), connected.clone());
    let hostile = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            for _ in 0..600 {
                let (stop, connected) = (hostile_stop.clone(), hostile_connected.clone());
                tokio::spawn(reopening_slow_client(addr, stop, connected));
            }
            // Bounded: the test stops them within a minute.
            for _ in 0..600 {
                if hostile_stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        runtime.shutdown_background();
    });
    // Until all 600 have sent a first half request (at most 20 s: the listener's backlog
    // holds those waiting for a slot).
    for _ in 0..200 {
        if connected.load(std::sync::atomic::Ordering::Relaxed) >= 600 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let before = connected.load(std::sync::atomic::Ordering::Relaxed);
    let start = std::time::Instant::now();
    let slowest = operator_requests(addr, 10, Duration::from_secs(5)).await;
    let opened = connected.load(std::sync::atomic::Ordering::Relaxed) - before;
    println!(
        "600 re-opening slow requests ({opened} connections opened in the {:?} of the \
         operator's requests): the slowest of 10 operator requests took {slowest:?}",
        start.elapsed()
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    hostile.join().unwrap();
}

/// A client that sends half a request's headers and waits; cut off, it re-opens at once (at
/// most 1 000 times, until `stop`). Counts its connections in `connected`.
async fn reopening_slow_client(
    addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    connected: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    for _ in 0..1000 {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let Ok(Ok(mut stream)) = tokio::time::timeout(
            Duration::from_secs(5),
            connect_from([127, 0, 0, 2], addr, None),
        )
        .await
        else {
            continue;
        };
        let _ = stream
            .write_all(b"GET /api/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .await;
        connected.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Held until the server cuts it off, or the test ends.
        let read = tokio::time::timeout(Duration::from_secs(30), read_all(&mut stream));
        let _ = read.await;
    }
}
