//! Hostile bodies through the real handler: deep nesting, huge numbers, long
//! strings, invalid UTF-8, NUL bytes, duplicate keys and a 6 MB body each get
//! their documented 4xx, quickly and with bounded memory.
//!
//! A test binary of its own because it installs a counting allocator. The
//! counts are per thread and the handler runs on the test's own thread (an
//! in-memory store never waits, so it needs no runtime), so tests running in
//! parallel do not disturb each other's measurements. For the same reason
//! "quickly" is this thread's CPU time, which a busy machine stretches far
//! less than the time on the wall.

// A test crate: a failing unwrap, expect, panic or index is how it reports.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use lambda_http::http::Method;
use lambda_http::http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use lambda_http::{Body, Request};
use plant_store::auth::Authenticator;
use plant_store::handler::App;
use plant_store::plant::MAX_BODY_BYTES;
use plant_store::store::MemoryStore;

// Shared with the fuzz targets: `block_on` polls the handler on this
// thread, where `measure` counts.
use plant_store::fuzzing::{JsonResponse, block_on};

struct CountingAllocator;

thread_local! {
    /// Bytes allocated and not yet freed by this thread (frees of memory
    /// allocated elsewhere count too, so only differences are meaningful).
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// The highest `LIVE` since the last `measure` started.
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn record(delta: isize) {
    // `try_with`: a thread being torn down has no counters any more.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

fn size(bytes: usize) -> isize {
    isize::try_from(bytes).unwrap_or(isize::MAX)
}

// SAFETY: every method forwards to `System` unchanged; the bookkeeping uses
// const-initialised thread-locals without destructors, which never allocate.
// Counting allocations needs a global allocator, which only unsafe code can be.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            record(size(layout.size()));
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            record(size(layout.size()));
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        record(-size(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            record(size(new_size) - size(layout.size()));
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Runs `f` and returns what it returned, the most memory it held at once
/// on this thread beyond what was live when it started, and the CPU time
/// this thread spent on it.
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize, Duration) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(start));
    let cpu_before = thread_cpu_time();
    let output = f();
    let cpu = thread_cpu_time().saturating_sub(cpu_before);
    let peak = PEAK.with(Cell::get) - start;
    (output, usize::try_from(peak).unwrap_or(0), cpu)
}

/// The CPU time this thread has used so far.
// The one unsafe call is the FFI below; std has no thread CPU clock.
#[allow(unsafe_code)]
fn thread_cpu_time() -> Duration {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `time` is a valid, writable timespec for the call's duration.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut time) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    let seconds = u64::try_from(time.tv_sec).expect("a CPU time after zero");
    let nanos = u32::try_from(time.tv_nsec).expect("nanoseconds under a second");
    Duration::new(seconds, nanos)
}

const TOKEN: &str = "hostile-test-token";
/// CPU time that a debug build needs many times over for any of these
/// bodies (well under a millisecond each here); a quadratic or exponential
/// path would need seconds to minutes.
const CPU_BOUND: Duration = Duration::from_secs(1);
/// The most memory the handler may hold at once per byte of an accepted-size
/// body. The worst case is many tiny members (`"":0,` is 5 bytes): each
/// costs a (key, raw value) entry of 40 bytes in a vector that doubles, and
/// a slot in the duplicate check, about 20 bytes per byte of body. Linear,
/// and the 16 KiB limit caps it at about a third of a megabyte.
const AMPLIFICATION: usize = 24;
/// Headroom for fixed costs: the response and its headers.
const MEMORY_SLACK: usize = 16 * 1024;

struct Outcome {
    status: u16,
    code: Option<u64>,
    message: String,
    cpu: Duration,
    peak_bytes: usize,
}

/// A fresh function over an empty in-memory store, and that store.
fn function() -> (App<MemoryStore>, MemoryStore) {
    let store = MemoryStore::default();
    let app = App::new(store.clone(), Authenticator::with_static_tokens(&[TOKEN]));
    (app, store)
}

/// One authenticated `POST /plants` of `body` (sent as binary, as a
/// base64-encoded body arrives), through a fresh function.
fn post(body: Vec<u8>) -> Outcome {
    post_to(&function().0, body, Some(TOKEN))
}

/// `POST /plants` of `body` to `app`, with `token` as the bearer token.
fn post_to(app: &App<MemoryStore>, body: Vec<u8>, token: Option<&str>) -> Outcome {
    let mut request = Request::new(Body::Binary(body));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = "/plants".parse().expect("a URI");
    request
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(token) = token {
        let value = HeaderValue::try_from(format!("Bearer {token}")).expect("a header value");
        request.headers_mut().insert(AUTHORIZATION, value);
    }

    let (response, peak_bytes, cpu) = measure(|| block_on(app.handle(request)));

    let response = JsonResponse::from(response);
    assert_eq!(response.header("content-type"), Some("application/json"));
    Outcome {
        status: response.status,
        code: response.body["error"].as_u64(),
        message: response.body["message"].as_str().unwrap_or_default().to_owned(),
        cpu,
        peak_bytes,
    }
}

/// Asserts the documented answer, the CPU bound and the memory bound for
/// each case.
fn assert_cases(cases: Vec<(&str, Vec<u8>, u16, u64)>) {
    for (case, body, status, code) in cases {
        let len = body.len();
        let outcome = post(body);
        assert_eq!(
            (outcome.status, outcome.code),
            (status, Some(code)),
            "{case}: {}",
            outcome.message
        );
        assert!(outcome.cpu < CPU_BOUND, "{case}: took {:?} of CPU", outcome.cpu);
        let bound = len.min(MAX_BODY_BYTES) * AMPLIFICATION + MEMORY_SLACK;
        assert!(
            outcome.peak_bytes < bound,
            "{case}: {len} bytes in, {} bytes held at once (bound {bound})",
            outcome.peak_bytes
        );
    }
}

fn nested(open: &str, depth: usize, close: &str) -> String {
    format!("{}{}", open.repeat(depth), close.repeat(depth))
}

fn plant_with(field: &str, value: &str) -> Vec<u8> {
    match field {
        "id" => format!(r#"{{"id":{value},"name":"n"}}"#),
        "name" => format!(r#"{{"id":1,"name":{value}}}"#),
        _ => format!(r#"{{"id":1,"name":"n","tag":{value}}}"#),
    }
    .into_bytes()
}

#[test]
fn deeply_nested_json_is_refused_without_recursion_or_a_stack_overflow() {
    let arrays = nested("[", 8_000, "]");
    let objects = format!("{}1{}", r#"{"a":"#.repeat(2_500), "}".repeat(2_500));
    assert!(arrays.len() <= MAX_BODY_BYTES && objects.len() <= MAX_BODY_BYTES);
    assert_cases(vec![
        (
            "8,000 nested arrays as the body",
            arrays.clone().into_bytes(),
            400,
            40001,
        ),
        (
            "2,500 nested objects as the body",
            objects.clone().into_bytes(),
            400,
            40005,
        ),
        (
            "8,000 nested arrays as the tag",
            plant_with("tag", &arrays),
            400,
            40003,
        ),
        (
            "2,500 nested objects as the id",
            plant_with("id", &objects),
            400,
            40003,
        ),
        (
            "16,000 unclosed arrays",
            "[".repeat(16_000).into_bytes(),
            400,
            40001,
        ),
        (
            "16,000 unclosed arrays as the name",
            plant_with("name", &"[".repeat(16_000)),
            400,
            40001,
        ),
        (
            "1,000,000 nested arrays (2 MB)",
            nested("[", 1_000_000, "]").into_bytes(),
            413,
            41301,
        ),
    ]);
}

/// Asserts that the most memory held at once for a body of `small * 8`
/// units (`body` makes one of n units) is under 12 times that for `small`
/// units: linear growth gives 8x at most (less, with fixed costs), quadratic
/// 64x.
fn assert_memory_grows_linearly(units: &str, small: usize, body: impl Fn(usize) -> Vec<u8>) {
    let large = small * 8;
    let (few, many) = (post(body(small)).peak_bytes, post(body(large)).peak_bytes);
    assert!(
        many < few * 12,
        "{small} {units}: {few} bytes, {large} {units}: {many} bytes"
    );
}

#[test]
fn memory_for_nesting_grows_with_the_depth_not_its_square() {
    assert_memory_grows_linearly("levels", 1_000, |depth| {
        plant_with("tag", &nested("[", depth, "]"))
    });
}

#[test]
fn huge_numbers_are_out_of_bounds_for_the_id_and_the_wrong_type_elsewhere() {
    let ten_to_400 = format!("1{}", "0".repeat(400));
    let many_digits = "9".repeat(16_000);
    assert_cases(vec![
        ("10^400 as the id", plant_with("id", &ten_to_400), 400, 40004),
        (
            "-10^400 as the id",
            plant_with("id", &format!("-{ten_to_400}")),
            400,
            40004,
        ),
        ("a 16,000-digit id", plant_with("id", &many_digits), 400, 40004),
        ("1e400 as the id", plant_with("id", "1e400"), 400, 40003),
        ("-1e-400 as the id", plant_with("id", "-1e-400"), 400, 40003),
        ("10^400 as the tag", plant_with("tag", &ten_to_400), 400, 40003),
        (
            "-10^400 as the name",
            plant_with("name", &format!("-{ten_to_400}")),
            400,
            40003,
        ),
        ("1e400 as the body", b"1e400".to_vec(), 400, 40001),
    ]);
}

#[test]
fn long_strings_are_refused_for_their_length() {
    let long = format!("\"{}\"", "a".repeat(16_000));
    let long_escapes = format!("\"{}\"", "\\u00e9".repeat(2_700));
    let long_key = format!(r#"{{"id":1,"name":"n",{long}:1}}"#);
    assert_cases(vec![
        ("a 16,000-character name", plant_with("name", &long), 400, 40004),
        ("a 16,000-character tag", plant_with("tag", &long), 400, 40004),
        (
            "a 2,700-character name of escapes",
            plant_with("name", &long_escapes),
            400,
            40004,
        ),
        ("a 16,000-character field name", long_key.into_bytes(), 400, 40005),
        (
            "a 16,000-character id string",
            plant_with("id", &long),
            400,
            40003,
        ),
    ]);
}

#[test]
fn invalid_utf8_is_refused_as_invalid_json() {
    let with = |bytes: &[u8]| [&br#"{"id":1,"name":"a"#[..], bytes, &br#""}"#[..]].concat();
    assert_cases(vec![
        ("a body of 0xff 0xfe", b"\xff\xfe".to_vec(), 400, 40001),
        ("a lone continuation byte in the name", with(b"\x80"), 400, 40001),
        ("an overlong '/' in the name", with(b"\xc0\xaf"), 400, 40001),
        (
            "a UTF-8 encoded surrogate in the name",
            with(b"\xed\xa0\x80"),
            400,
            40001,
        ),
        (
            "a code point beyond U+10FFFF in the name",
            with(b"\xf4\x90\x80\x80"),
            400,
            40001,
        ),
        (
            "a truncated character in the name",
            with(b"\xf0\x9f\x8c"),
            400,
            40001,
        ),
        (
            "invalid UTF-8 in a field name",
            b"{\"i\xffd\":1,\"name\":\"n\"}".to_vec(),
            400,
            40001,
        ),
        ("UTF-16 (with a BOM)", b"\xff\xfe{\0}\0".to_vec(), 400, 40001),
        (
            "a UTF-8 byte order mark",
            b"\xef\xbb\xbf{\"id\":1,\"name\":\"n\"}".to_vec(),
            400,
            40001,
        ),
        ("16 KiB of 0xff", vec![0xff; MAX_BODY_BYTES], 400, 40001),
    ]);
}

#[test]
fn nul_bytes_are_invalid_json_raw_and_a_forbidden_control_escaped() {
    assert_cases(vec![
        (
            "a raw NUL in the name",
            b"{\"id\":1,\"name\":\"a\0b\"}".to_vec(),
            400,
            40001,
        ),
        (
            "an escaped NUL in the name",
            plant_with("name", r#""a\u0000b""#),
            400,
            40004,
        ),
        (
            "an escaped NUL in the tag",
            plant_with("tag", r#""\u0000""#),
            400,
            40004,
        ),
        (
            "an escaped NUL in a field name",
            br#"{"id":1,"name":"n","\u0000":1}"#.to_vec(),
            400,
            40005,
        ),
        (
            "a NUL before the object",
            b"\0{\"id\":1,\"name\":\"n\"}".to_vec(),
            400,
            40001,
        ),
        (
            "a NUL after the object",
            b"{\"id\":1,\"name\":\"n\"}\0".to_vec(),
            400,
            40001,
        ),
        ("16 KiB of NUL", vec![0; MAX_BODY_BYTES], 400, 40001),
    ]);
}

#[test]
fn duplicate_keys_are_refused_however_they_are_spelled() {
    let many_duplicates = format!(r#"{{"name":"n",{}"id":1}}"#, r#""id":1,"#.repeat(2_000));
    let many_unknown: Vec<String> = (0..1_500).map(|i| format!(r#""k{i}":0"#)).collect();
    let many_unknown = format!(r#"{{"id":1,"name":"n",{}}}"#, many_unknown.join(","));
    assert_cases(vec![
        ("id twice", br#"{"id":1,"id":2,"name":"n"}"#.to_vec(), 400, 40001),
        (
            "the same id twice",
            br#"{"id":1,"name":"n","id":1}"#.to_vec(),
            400,
            40001,
        ),
        (
            "name twice, once escaped",
            br#"{"id":1,"name":"a","\u006eame":"a"}"#.to_vec(),
            400,
            40001,
        ),
        (
            "tag twice",
            br#"{"id":1,"name":"n","tag":"a","tag":"b"}"#.to_vec(),
            400,
            40001,
        ),
        ("2,000 copies of id", many_duplicates.into_bytes(), 400, 40001),
        (
            "1,500 distinct unknown fields",
            many_unknown.into_bytes(),
            400,
            40005,
        ),
        (
            "3,270 empty field names, the densest members",
            tiny_members(3_270),
            400,
            40001,
        ),
    ]);
}

/// `{"":0,"":0,…}`: as many members as 5 bytes each allow.
fn tiny_members(count: usize) -> Vec<u8> {
    format!("{{{}}}", vec![r#""":0"#; count].join(",")).into_bytes()
}

#[test]
fn memory_for_members_grows_with_their_number_not_its_square() {
    assert_memory_grows_linearly("members", 400, tiny_members);
}

#[test]
fn a_6_mb_body_is_refused_before_parsing_without_a_copy() {
    const SIX_MB: usize = 6 * 1024 * 1024;
    let valid_prefix = format!(r#"{{"id":1,"name":"n","tag":"{}"}}"#, "a".repeat(SIX_MB));
    let cases = vec![
        ("6 MB of JSON", valid_prefix.into_bytes(), 413, 41301),
        (
            "6 MB of nested arrays",
            nested("[", SIX_MB / 2, "]").into_bytes(),
            413,
            41301,
        ),
        ("6 MB of invalid UTF-8", vec![0xff; SIX_MB], 413, 41301),
        ("16 KiB and one byte", vec![b' '; MAX_BODY_BYTES + 1], 413, 41301),
    ];
    for (case, body, status, code) in cases {
        let outcome = post(body);
        assert_eq!((outcome.status, outcome.code), (status, Some(code)), "{case}");
        assert!(outcome.cpu < CPU_BOUND, "{case}: took {:?} of CPU", outcome.cpu);
        assert!(
            outcome.peak_bytes < MEMORY_SLACK,
            "{case}: {} bytes held at once",
            outcome.peak_bytes
        );
    }
}

#[test]
fn the_largest_accepted_body_is_stored_and_a_6_mb_body_without_a_token_is_401() {
    let mut largest = br#"{"id":1,"name":"n"}"#.to_vec();
    largest.resize(MAX_BODY_BYTES, b' ');
    let (app, store) = function();
    let accepted = post_to(&app, largest, Some(TOKEN));
    assert_eq!(accepted.status, 200, "{}", accepted.message);
    let stored = store.get(1.into()).expect("the plant is stored");
    assert_eq!(
        (stored.name.as_str(), stored.tag.as_ref().map(|tag| tag.as_str())),
        ("n", None)
    );
    assert_eq!(store.len(), 1);

    // Authentication comes first: the size of an anonymous body is not
    // even looked at, and nothing is stored.
    let (app, store) = function();
    let anonymous = post_to(&app, vec![b'{'; 6 * 1024 * 1024], None);
    assert_eq!((anonymous.status, anonymous.code), (401, Some(40101)));
    assert!(anonymous.peak_bytes < MEMORY_SLACK, "{}", anonymous.peak_bytes);
    assert!(store.is_empty());
}
