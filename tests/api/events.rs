//! Every file in `events/` replayed through the real handler against
//! DynamoDB Local. A new event without an expectation here fails the suite.
//! And each decoded by the host as `lambda_http` decodes it, so that the
//! function routes on the request `lambda_http::run` would have given it.

use lambda_host::envelope;
use lambda_host::test_util::request_parts;
use serde_json::{Value, json};

use crate::helpers::{Event, TestApp, assert_item};

/// What must happen before the event is sent.
enum Setup {
    Nothing,
    /// The same event was already sent once (the client is retrying).
    SameEventFirst,
    /// This body was already created through the HTTP API.
    Created(&'static str),
}

/// What the table must hold afterwards.
enum Stored {
    /// Exactly this one plant.
    Plant(i64, &'static str, Option<&'static str>),
    Nothing,
}

struct Expectation {
    setup: Setup,
    status: u16,
    body: Value,
    stored: Stored,
}

fn created(id: i64, name: &'static str, tag: Option<&'static str>) -> Expectation {
    let body = match tag {
        Some(tag) => json!({ "name": name, "tag": tag }),
        None => json!({ "name": name }),
    };
    Expectation {
        setup: Setup::Nothing,
        status: 200,
        body,
        stored: Stored::Plant(id, name, tag),
    }
}

fn rejected(status: u16, error: u32, message: &str) -> Expectation {
    Expectation {
        setup: Setup::Nothing,
        status,
        body: json!({ "error": error, "message": message }),
        stored: Stored::Nothing,
    }
}

fn expectation(file: &str) -> Option<Expectation> {
    Some(match file {
        "create-http-api.json" => created(1001, "Monstera deliciosa", Some("aroid")),
        "create-rest-api-stage.json" => created(1002, "Ficus lyrata", Some("fig")),
        "create-alb.json" => created(1003, "Calathea orbifolia", Some("prayer plant")),
        "create-function-url.json" => created(1004, "Pilea peperomioides", Some("pilea")),
        "create-without-tag.json" => created(1005, "Sansevieria trifasciata", None),
        "retry-same-body.json" => Expectation {
            setup: Setup::SameEventFirst,
            ..created(1006, "Epipremnum aureum", Some("pothos"))
        },
        "conflict-different-body.json" => Expectation {
            setup: Setup::Created(r#"{"id":1007,"name":"Aloe vera"}"#),
            status: 409,
            body: json!({ "error": 40901, "message": "a different plant with id 1007 already exists" }),
            stored: Stored::Plant(1007, "Aloe vera", None),
        },
        "missing-token.json" => rejected(401, 40101, "missing bearer token"),
        "unknown-token.json" => rejected(401, 40102, "invalid bearer token"),
        "lowercase-bearer-scheme.json" => created(1010, "Hedera helix", Some("ivy")),
        "malformed-json.json" => rejected(
            400,
            40001,
            "request body is not valid JSON: EOF while parsing an object at line 1 column 24",
        ),
        "unknown-field.json" => rejected(400, 40005, "unknown field `colour`"),
        "name-too-long.json" => rejected(400, 40004, "field `name` must be 1 to 256 characters"),
        "wrong-content-type.json" => rejected(415, 41501, "Content-Type must be application/json"),
        "oversized-body.json" => rejected(413, 41301, "request body exceeds 16384 bytes"),
        "base64-body.json" => created(1016, "Aloe vera", Some("succulent")),
        "get-plants.json" => rejected(405, 40501, "method not allowed; use POST"),
        "unknown-path.json" => rejected(404, 40401, "no such resource"),
        "create-http-api-custom-domain.json" => created(1017, "Strelitzia nicolai", Some("bird of paradise")),
        "create-rest-api-custom-domain.json" => created(1018, "Zamioculcas zamiifolia", Some("zz plant")),
        "unknown-path-custom-domain.json" => rejected(404, 40401, "no such resource"),
        _ => return None,
    })
}

/// The names of the files in `events/`, sorted; all 21 of them at least.
fn sample_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(Event::path(""))
        .expect("events/ exists")
        .map(|entry| {
            entry
                .expect("readable events/")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 21,
        "expected the full set of sample events, found {files:?}"
    );
    files
}

#[tokio::test]
async fn every_sample_event_gets_its_documented_answer_and_stored_item() {
    for file in sample_files() {
        let Some(expected) = expectation(&file) else {
            panic!("events/{file} has no expectation in tests/api/events.rs");
        };
        let app = TestApp::new().await;
        let event = Event::load(&file);
        match expected.setup {
            Setup::Nothing => {}
            Setup::SameEventFirst => {
                assert_eq!(app.send(event.request()).await.status, 200, "{file}: first send")
            }
            Setup::Created(body) => assert_eq!(app.create(body).await.status, 200, "{file}: setup"),
        }
        let before = app.items().await;

        let response = app.send(event.request()).await;

        assert_eq!(
            (response.status, &response.body),
            (expected.status, &expected.body),
            "events/{file}"
        );
        response.assert_standard_headers();
        let items = app.items().await;
        match expected.stored {
            Stored::Plant(id, name, tag) => {
                assert_eq!(items.len(), 1, "events/{file}: {items:?}");
                assert_item(&items[0], id, name, tag);
            }
            Stored::Nothing => assert!(items.is_empty(), "events/{file} wrote {items:?}"),
        }
        if !before.is_empty() {
            assert_eq!(items, before, "events/{file} changed what was stored before it");
        }
    }
}

#[tokio::test]
async fn auth_failures_in_the_samples_carry_their_challenges() {
    let app = TestApp::new().await;
    let missing = app.send(Event::load("missing-token.json").request()).await;
    assert_eq!(
        missing.header("www-authenticate"),
        Some(r#"Bearer realm="plants""#)
    );
    let unknown = app.send(Event::load("unknown-token.json").request()).await;
    assert_eq!(
        unknown.header("www-authenticate"),
        Some(r#"Bearer realm="plants", error="invalid_token""#)
    );
    let get = app.send(Event::load("get-plants.json").request()).await;
    assert_eq!(get.header("allow"), Some("POST"));
}

#[test]
fn every_sample_event_decodes_to_the_request_lambda_http_makes_of_it() {
    for file in sample_files() {
        let event = Event::load(&file).text();
        let theirs = lambda_http::request::from_str(&event)
            .unwrap_or_else(|err| panic!("events/{file}: lambda_http: {err}"));
        let ours = envelope::decode(event.as_bytes())
            .unwrap_or_else(|err| panic!("events/{file}: {err}"))
            .request;
        assert_eq!(request_parts(&ours), request_parts(&theirs), "events/{file}");
    }
}
