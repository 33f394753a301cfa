//! Creating plants through the real handler, proven against DynamoDB Local:
//! what is stored, what is not, and what happens under concurrency.

use plant_store::store::client::ATTEMPT_TIMEOUT;

use plant_store::store::DynamoStore;
use serde_json::json;

use crate::helpers::{Event, TestApp, TestResponse, assert_item, client_for, create_request, unique_name};

#[tokio::test]
async fn a_new_plant_with_a_tag_is_stored_exactly_and_echoed_without_its_id() {
    let app = TestApp::new().await;

    let response = app.create(r#"{"id":42,"name":"Monstera","tag":"aroid"}"#).await;

    assert_eq!(response.status, 200);
    assert_eq!(response.body, json!({ "name": "Monstera", "tag": "aroid" }));
    response.assert_standard_headers();
    assert_item(
        &app.stored(42).await.expect("stored"),
        42,
        "Monstera",
        Some("aroid"),
    );
}

#[tokio::test]
async fn a_plant_without_a_tag_is_stored_without_a_tag_attribute() {
    let app = TestApp::new().await;

    let response = app.create(r#"{"name":"Fern","id":7}"#).await;

    assert_eq!(
        (response.status, response.body.clone()),
        (200, json!({ "name": "Fern" }))
    );
    assert_item(&app.stored(7).await.expect("stored"), 7, "Fern", None);
}

#[tokio::test]
async fn names_are_stored_exactly_as_sent_including_spaces_and_unicode() {
    let app = TestApp::new().await;
    let name = "  Pilea 🌱 peperomioides\u{a0}";

    let body = json!({ "id": 3, "name": name, "tag": "ü" }).to_string();
    let response = app.create(&body).await;

    assert_eq!(
        (response.status, response.body.clone()),
        (200, json!({ "name": name, "tag": "ü" }))
    );
    assert_item(&app.stored(3).await.expect("stored"), 3, name, Some("ü"));
}

#[tokio::test]
async fn the_extremes_of_int64_are_stored_exactly() {
    let app = TestApp::new().await;

    for id in [i64::MIN, i64::MAX] {
        let response = app.create(&format!(r#"{{"id":{id},"name":"extreme"}}"#)).await;
        assert_eq!(response.status, 200, "id {id}: {}", response.body);
        assert_item(&app.stored(id).await.expect("stored"), id, "extreme", None);
    }
    assert_eq!(app.items().await.len(), 2);
}

#[tokio::test]
async fn a_retry_with_the_same_body_returns_200_and_writes_once() {
    let app = TestApp::new().await;
    let body = r#"{"id":5,"name":"Aloe","tag":"succulent"}"#;
    let first = app.create(body).await;
    let stored = app.stored(5).await.expect("stored");

    let retry = app.create(body).await;

    assert_eq!((first.status, retry.status), (200, 200));
    assert_eq!(retry.body, first.body);
    assert_eq!(
        app.stored(5).await,
        Some(stored),
        "the retry rewrote the item (created_at changed)"
    );
    assert_eq!(app.items().await.len(), 1);
}

#[tokio::test]
async fn a_retry_with_the_fields_in_another_order_is_still_a_retry() {
    let app = TestApp::new().await;
    assert_eq!(
        app.create(r#"{"id":5,"name":"Aloe","tag":"x"}"#).await.status,
        200
    );

    let retry = app.create(r#"{"tag":"x","name":"Aloe","id":5}"#).await;

    assert_eq!(
        (retry.status, retry.body.clone()),
        (200, json!({ "name": "Aloe", "tag": "x" }))
    );
}

#[tokio::test]
async fn a_different_plant_under_a_taken_id_is_a_409_and_leaves_the_stored_plant_unchanged() {
    let cases = [
        (
            r#"{"id":9,"name":"Aloe","tag":"x"}"#,
            r#"{"id":9,"name":"Aloe","tag":"y"}"#,
        ),
        (r#"{"id":9,"name":"Aloe","tag":"x"}"#, r#"{"id":9,"name":"Aloe"}"#),
        (r#"{"id":9,"name":"Aloe"}"#, r#"{"id":9,"name":"Aloe","tag":"x"}"#),
        (r#"{"id":9,"name":"Aloe"}"#, r#"{"id":9,"name":"aloe"}"#),
        (r#"{"id":9,"name":"Aloe"}"#, r#"{"id":9,"name":"Aloe "}"#),
    ];
    for (first, second) in cases {
        let app = TestApp::new().await;
        assert_eq!(app.create(first).await.status, 200, "{first}");
        let stored = app.stored(9).await;

        let response = app.create(second).await;

        assert_eq!(
            (response.status, response.body.clone()),
            (
                409,
                json!({ "error": 40901, "message": "a different plant with id 9 already exists" })
            ),
            "{first} then {second}"
        );
        assert_eq!(app.stored(9).await, stored, "{first} then {second}");
    }
}

/// A fresh table sent `count` creates at once, `body(n)` the body of the
/// n-th, and the responses in that order.
async fn concurrent_creates(count: i64, body: impl Fn(i64) -> String) -> (TestApp, Vec<TestResponse>) {
    let app = TestApp::new().await;
    let creates = (0..count).map(|n| create_request(&body(n))).collect();
    let responses = app.send_concurrently(creates).await;
    (app, responses)
}

#[tokio::test]
async fn forty_concurrent_creates_with_distinct_ids_all_persist() {
    let (app, responses) = concurrent_creates(40, |id| format!(r#"{{"id":{id},"name":"plant {id}"}}"#)).await;

    let statuses: Vec<u16> = responses.iter().map(|response| response.status).collect();
    assert_eq!(statuses, [200; 40]);
    for id in 0..40 {
        let item = app
            .stored(id)
            .await
            .unwrap_or_else(|| panic!("plant {id} was lost"));
        assert_item(&item, id, &format!("plant {id}"), None);
    }
    assert_eq!(app.items().await.len(), 40);
}

#[tokio::test]
async fn sixteen_concurrent_creates_of_one_id_give_one_200_and_fifteen_409s_and_the_winner_is_stored() {
    let (app, responses) = concurrent_creates(16, |n| format!(r#"{{"id":77,"name":"contender {n}"}}"#)).await;

    let winners: Vec<_> = (0..)
        .zip(&responses)
        .filter(|(_, response)| response.status == 200)
        .collect();
    let conflicts = responses.iter().filter(|response| response.status == 409).count();
    assert_eq!((winners.len(), conflicts), (1, 15));
    let (winner, response) = winners[0];
    assert_eq!(response.body, json!({ "name": format!("contender {winner}") }));
    assert_item(
        &app.stored(77).await.expect("stored"),
        77,
        &format!("contender {winner}"),
        None,
    );
    assert_eq!(app.items().await.len(), 1);
}

#[tokio::test]
async fn invalid_bodies_get_their_code_and_write_nothing() {
    let app = TestApp::new().await;
    let long_name = "n".repeat(257);
    let long_tag = "t".repeat(65);
    let cases: Vec<(&str, String, u32, &str)> = vec![
        ("empty body", String::new(), 40001, "request body is empty"),
        (
            "array",
            r#"[{"id":1,"name":"a"}]"#.into(),
            40001,
            "request body must be a JSON object",
        ),
        (
            "duplicate name",
            r#"{"id":1,"name":"a","name":"b"}"#.into(),
            40001,
            "duplicate field `name`",
        ),
        (
            "no id",
            r#"{"name":"a"}"#.into(),
            40002,
            "missing required field `id`",
        ),
        (
            "no name",
            r#"{"id":1}"#.into(),
            40002,
            "missing required field `name`",
        ),
        (
            "string id",
            r#"{"id":"1","name":"a"}"#.into(),
            40003,
            "field `id` must be an integer",
        ),
        (
            "float id",
            r#"{"id":1.0,"name":"a"}"#.into(),
            40003,
            "field `id` must be an integer",
        ),
        (
            "exponent id",
            r#"{"id":1e3,"name":"a"}"#.into(),
            40003,
            "field `id` must be an integer",
        ),
        (
            "null id",
            r#"{"id":null,"name":"a"}"#.into(),
            40003,
            "field `id` must be an integer",
        ),
        (
            "null name",
            r#"{"id":1,"name":null}"#.into(),
            40003,
            "field `name` must be a string",
        ),
        (
            "null tag",
            r#"{"id":1,"name":"a","tag":null}"#.into(),
            40003,
            "field `tag` must be a string",
        ),
        (
            "id above int64",
            r#"{"id":9223372036854775808,"name":"a"}"#.into(),
            40004,
            "field `id` must be an integer from -9223372036854775808 to 9223372036854775807",
        ),
        (
            "empty name",
            r#"{"id":1,"name":""}"#.into(),
            40004,
            "field `name` must be 1 to 256 characters",
        ),
        (
            "257-character name",
            format!(r#"{{"id":1,"name":"{long_name}"}}"#),
            40004,
            "field `name` must be 1 to 256 characters",
        ),
        (
            "65-character tag",
            format!(r#"{{"id":1,"name":"a","tag":"{long_tag}"}}"#),
            40004,
            "field `tag` must be 1 to 64 characters",
        ),
        (
            "blank name",
            r#"{"id":1,"name":"   "}"#.into(),
            40004,
            "field `name` must not be only whitespace",
        ),
        (
            "NUL in name",
            r#"{"id":1,"name":"a\u0000"}"#.into(),
            40004,
            "field `name` must not contain control characters",
        ),
        (
            "unknown field",
            r#"{"id":1,"name":"a","price":3}"#.into(),
            40005,
            "unknown field `price`",
        ),
    ];

    for (case, body, code, message) in cases {
        let response = app.create(&body).await;
        assert_eq!(
            (response.status, response.body.clone()),
            (400, json!({ "error": code, "message": message })),
            "{case}"
        );
    }
    assert!(app.items().await.is_empty(), "a rejected request wrote an item");
}

#[tokio::test]
async fn requests_refused_before_parsing_write_nothing_even_with_a_valid_body() {
    let app = TestApp::new().await;
    let valid = Event::load("create-http-api.json").body(r#"{"id":1,"name":"a"}"#);
    let oversized = format!(r#"{{"id":1,"name":"a"{}}}"#, " ".repeat(16 * 1024));
    let cases = [
        (
            "no token",
            valid.clone().header("authorization", None),
            401,
            40101,
        ),
        (
            "basic auth",
            valid
                .clone()
                .header("authorization", Some("Basic cGxhbnQ6c3RvcmU=")),
            401,
            40101,
        ),
        (
            "wrong token",
            valid.clone().header("authorization", Some("Bearer nope")),
            401,
            40102,
        ),
        (
            "no content type",
            valid.clone().header("content-type", None),
            415,
            41501,
        ),
        (
            "form content type",
            valid
                .clone()
                .header("content-type", Some("application/x-www-form-urlencoded")),
            415,
            41501,
        ),
        ("too large", valid.clone().body(&oversized), 413, 41301),
        ("PUT", valid.clone().method("PUT"), 405, 40501),
        ("other path", valid.clone().raw_path("/plants/1"), 404, 40401),
        ("trailing slash", valid.clone().raw_path("/plants/"), 404, 40401),
    ];

    for (case, event, status, code) in cases {
        let response = app.send(event.request()).await;
        assert_eq!(
            (response.status, &response.body["error"]),
            (status, &json!(code)),
            "{case}"
        );
        response.assert_standard_headers();
    }
    assert!(app.items().await.is_empty(), "a rejected request wrote an item");
}

#[tokio::test]
async fn authentication_is_checked_before_the_body() {
    let app = TestApp::new().await;
    let event = Event::load("malformed-json.json").header("authorization", None);

    let response = app.send(event.request()).await;

    assert_eq!(response.status, 401);
    assert_eq!(response.body["error"], 40101);
}

#[tokio::test]
async fn a_body_of_exactly_16_kib_is_accepted() {
    let app = TestApp::new().await;
    let prefix = r#"{"id":1,"name":"big"}"#;
    let body = format!("{prefix}{}", " ".repeat(16 * 1024 - prefix.len()));
    assert_eq!(body.len(), 16 * 1024);

    let response = app.create(&body).await;

    assert_eq!(
        (response.status, response.body.clone()),
        (200, json!({ "name": "big" }))
    );
}

#[tokio::test]
async fn the_json_content_type_may_carry_a_utf8_charset() {
    let app = TestApp::new().await;
    let event = Event::load("create-http-api.json")
        .body(r#"{"id":1,"name":"a"}"#)
        .header("content-type", Some("application/json; charset=UTF-8"));

    let response = app.send(event.request()).await;

    assert_eq!(response.status, 200);
}

/// The custom-domain sample event of one front door, where its path and
/// the route API Gateway matched are written, and the plant its body holds.
struct CustomDomain {
    file: &'static str,
    path: &'static str,
    route: &'static str,
    plant: (i64, &'static str, &'static str),
}

const HTTP_API: CustomDomain = CustomDomain {
    file: "create-http-api-custom-domain.json",
    path: "/rawPath",
    route: "/requestContext/routeKey",
    plant: (1017, "Strelitzia nicolai", "bird of paradise"),
};

const REST_API: CustomDomain = CustomDomain {
    file: "create-rest-api-custom-domain.json",
    path: "/path",
    route: "/requestContext/resourcePath",
    plant: (1018, "Zamioculcas zamiifolia", "zz plant"),
};

/// Where a request behind a custom domain must end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Routed {
    /// At `POST /plants`: a 200 and the event's plant stored.
    ToPlants,
    /// Nowhere of ours: the 404 and nothing stored.
    Nowhere,
}

#[tokio::test]
async fn behind_a_custom_domain_mapping_keys_of_any_depth_route_to_plants_and_other_paths_are_still_404() {
    use Routed::{Nowhere, ToPlants};
    // (the path API Gateway passes on, the route it matched, where it ends)
    let http_api = [
        ("/v1/plants", "POST /plants", ToPlants),
        ("/orders/v1/plants", "POST /plants", ToPlants),
        ("/v1/plants", "ANY /plants", ToPlants),
        // A $default route names no path of ours.
        ("/v1/plants", "$default", Nowhere),
        ("/v1/animals", "$default", Nowhere),
        // The route must end the path at a segment boundary, after whole segments.
        ("/v1xplants", "POST /plants", Nowhere),
        ("/v1//plants", "POST /plants", Nowhere),
        ("/v1/plants/extra", "POST /plants", Nowhere),
    ];
    let rest_api = [
        ("/orders/v1/plants", "/plants", ToPlants),
        ("/v1/plants", "/plants", ToPlants),
        // A greedy resource names no path of ours.
        ("/v1/plants", "/{proxy+}", Nowhere),
        ("/orders/v1/animals", "/plants", Nowhere),
    ];

    for (front, cases) in [(HTTP_API, &http_api[..]), (REST_API, &rest_api[..])] {
        for &(path, route, routed) in cases {
            let app = TestApp::new().await;
            let event = Event::load(front.file)
                .set(front.path, json!(path))
                .set(front.route, json!(route));
            let case = format!("{} {path} {route}", front.file);

            let response = app.send(event.request()).await;

            let (id, name, tag) = front.plant;
            if routed == ToPlants {
                assert_eq!(
                    (response.status, &response.body),
                    (200, &json!({ "name": name, "tag": tag })),
                    "{case}"
                );
                assert_item(&app.stored(id).await.expect("stored"), id, name, Some(tag));
            } else {
                assert_eq!(
                    (response.status, &response.body),
                    (404, &json!({ "error": 40401, "message": "no such resource" })),
                    "{case}"
                );
            }
            let expected_items = usize::from(routed == ToPlants);
            assert_eq!(app.items().await.len(), expected_items, "{case}");
        }
    }
}

/// A `$default` route names no path, so only the stage can be taken off:
/// the test above would route by its route key `POST /plants` alone.
#[tokio::test]
async fn on_a_named_stage_with_a_default_route_the_stage_is_taken_off_as_a_whole_segment() {
    // (the raw path, whether it is ours)
    let cases = [
        ("/prod/plants", true),
        ("/prod/animals", false),
        ("/production/plants", false),
        ("/prodplants", false),
    ];
    for (path, ours) in cases {
        let app = TestApp::new().await;
        let event = Event::load("create-http-api.json")
            .raw_path(path)
            .stage("prod")
            .set("/requestContext/routeKey", json!("$default"));

        let response = app.send(event.request()).await;

        let stored = app.stored(1001).await;
        if ours {
            assert_eq!(response.status, 200, "{path}: {}", response.body);
            assert_item(
                &stored.expect("stored"),
                1001,
                "Monstera deliciosa",
                Some("aroid"),
            );
        } else {
            assert_eq!(
                (response.status, &response.body),
                (404, &json!({ "error": 40401, "message": "no such resource" })),
                "{path}"
            );
            assert_eq!(stored, None, "{path}");
        }
    }
}

#[tokio::test]
async fn an_unreachable_store_is_a_quick_503_with_retry_after_and_a_generic_message() {
    // A port that was free a moment ago: connections are refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = client_for(&format!("http://127.0.0.1:{port}"));
    let app = TestApp::with_store(
        client.clone(),
        DynamoStore::new(client, "plants"),
        "plants".into(),
    );
    // On tokio's clock, paused: only the SDK's timers (timeouts,
    // backoffs) move it, however busy the machine is.
    tokio::time::pause();
    let started = tokio::time::Instant::now();

    let response = app.create(r#"{"id":1,"name":"a"}"#).await;
    let elapsed = started.elapsed();
    tokio::time::resume();

    assert_eq!(
        (response.status, response.body.clone()),
        (
            503,
            json!({ "error": 50301, "message": "the store is temporarily unavailable; retry later" })
        )
    );
    assert_eq!(response.header("retry-after"), Some("1"));
    response.assert_standard_headers();
    // Quick: no attempt waited for its timeout (the backoffs between the
    // refused attempts come to under 0.2 s).
    assert!(elapsed < ATTEMPT_TIMEOUT, "took {elapsed:?}");
}

#[tokio::test]
async fn a_missing_table_is_a_500_that_names_nothing_internal() {
    let probe = TestApp::new().await;
    let missing = unique_name("no-such-table");
    let app = TestApp::with_store(
        probe.client.clone(),
        DynamoStore::new(probe.client.clone(), &missing),
        missing,
    );

    let response = app.create(r#"{"id":1,"name":"a"}"#).await;

    assert_eq!(
        (response.status, response.body.clone()),
        (500, json!({ "error": 50001, "message": "internal error" }))
    );
}
