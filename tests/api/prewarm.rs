//! The init-time pre-warm opens the connection to DynamoDB, and is harmless
//! when DynamoDB is down: init goes on, bounded, and requests still get
//! their documented answers.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use plant_store::store::DynamoStore;
use plant_store::store::client::PREWARM_TIMEOUT;

use crate::helpers::{DEV_TOKEN, TestApp, built_function, client_for, unique_name};

/// A port on which nothing listens: connections are refused at once.
fn refused_endpoint() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    format!("http://127.0.0.1:{port}")
}

#[tokio::test]
async fn the_prewarm_succeeds_against_a_live_table() {
    let app = TestApp::new().await;
    let store = DynamoStore::new(app.client.clone(), &app.table);

    store.prewarm().await.expect("DescribeTable on DynamoDB Local");

    let response = app.create(r#"{"id":1,"name":"Fern"}"#).await;
    assert_eq!(response.status, 200, "{}", response.body);
}

#[tokio::test]
async fn a_prewarm_against_a_refused_port_fails_on_the_refusal_and_requests_still_get_503() {
    let client = client_for(&refused_endpoint());
    let table = unique_name("plants");
    let store = DynamoStore::new(client.clone(), &table);

    let started = Instant::now();
    let result = store.prewarm().await;

    // Ended by the refusal, not by its timeout: what "at once" means here
    // whatever the machine's load, which could stretch any wall-clock bound.
    let err = result.expect_err("a refused connection fails the pre-warm");
    assert!(
        err.to_string().contains("Connection refused"),
        "{err} after {:?}",
        started.elapsed()
    );
    let app = TestApp::with_store(client, store, table);
    let response = app.create(r#"{"id":1,"name":"Fern"}"#).await;
    assert_eq!(response.status, 503, "{}", response.body);
}

#[tokio::test]
async fn a_prewarm_against_a_store_that_never_answers_gives_up_after_one_attempt_not_before_its_timeout() {
    // Accepts connections and never answers, like a black-holed route.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("address"));
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    let accept = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            held.push(socket);
        }
    });
    // The request path's budgets: retries, and five seconds in all.
    let store = DynamoStore::new(client_for(&endpoint), unique_name("plants"));

    let started = Instant::now();
    let result = store.prewarm().await;
    let elapsed = started.elapsed();

    assert!(result.is_err(), "{result:?}");
    // Its own budget, not the request path's, which retries: one attempt.
    // How long after its timeout it gave up is the machine's business (a
    // busy one only makes it later); that it waited that long is not (a
    // timer never ends early).
    assert_eq!(connections.load(Ordering::SeqCst), 1, "attempts");
    assert!(elapsed >= PREWARM_TIMEOUT, "{elapsed:?}");
    accept.abort();
}

#[test]
fn the_built_function_reaches_the_runtime_api_when_dynamodb_is_down() {
    let runtime_api = TcpListener::bind("127.0.0.1:0").expect("bind the fake Runtime API");
    let address = runtime_api.local_addr().expect("address");
    let digest = plant_store::auth::StaticTokens::digest_hex(DEV_TOKEN);
    let endpoint = refused_endpoint();
    let mut function = built_function()
        .env_clear()
        .envs([
            ("TABLE_NAME", "plants"),
            ("PLANTS_TOKEN_SHA256", digest.as_str()),
            ("AWS_ENDPOINT_URL_DYNAMODB", endpoint.as_str()),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "local"),
            ("AWS_SECRET_ACCESS_KEY", "local"),
            ("AWS_LAMBDA_RUNTIME_API", &address.to_string()),
            ("AWS_LAMBDA_FUNCTION_NAME", "plant-store"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the function binary runs");

    let socket = accept_within(&runtime_api, Duration::from_secs(30));
    let mut request_line = String::new();
    BufReader::new(socket)
        .read_line(&mut request_line)
        .expect("a request line");
    let workers = worker_threads(function.id());
    let _ = function.kill();
    let output = function.wait_with_output().expect("the function's output");
    let log = String::from_utf8_lossy(&output.stdout);

    assert!(
        request_line.starts_with("GET /2018-06-01/runtime/invocation/next "),
        "{request_line:?}"
    );
    assert!(
        log.contains("pre-warm failed; the first request will open the connection"),
        "{log}"
    );
    assert_eq!(workers, Vec::<String>::new(), "the runtime is single-threaded");
}

/// The first connection to `listener`, which must come `within`: only a
/// function whose init hangs takes that long.
fn accept_within(listener: &TcpListener, within: Duration) -> std::net::TcpStream {
    listener.set_nonblocking(true).expect("a non-blocking listener");
    let started = Instant::now();
    loop {
        match listener.accept() {
            Ok((socket, _)) => {
                socket.set_nonblocking(false).expect("a blocking socket");
                return socket;
            }
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    started.elapsed() < within,
                    "the function did not poll the Runtime API within {within:?}"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(err) => panic!("accepting the function's connection: {err}"),
        }
    }
}

/// The names of the process's Tokio worker threads (Linux `/proc`).
fn worker_threads(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| name.starts_with("tokio-rt-worker"))
        .collect()
}
