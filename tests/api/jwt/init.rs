//! The issuer's keys during init: fetched before the first request, an
//! issuer out of reach no reason not to start, and a discovery document
//! that contradicts the configuration a reason to refuse; in the library,
//! then in the built function under the stand-in Runtime API.

use std::process::Output;

use super::*;
use crate::helpers::function;
use crate::runtime_fake::FakeRuntimeApi;

#[tokio::test]
async fn the_keys_fetched_during_init_spare_the_first_request_the_wait() {
    let server = JwksServer::start(standard_jwks()).await;
    // A fetch never times out (`patient`): a request that waited for one
    // would hang.
    let verifier = verifier(&server, patient());
    let app = TestApp::with_authenticator(Authenticator::with_jwt(verifier.clone())).await;

    verifier.prepare().await.expect("the keys");
    assert_eq!(server.fetches(), 1);
    // From now on the issuer answers nothing.
    server.hold();
    let response = promptly("the first request", app.send(request(&Jwt::rs256().encode(), 1))).await;

    assert_outcome(&app, &response, 1, Expect::Created, "the first request").await;
    assert_eq!(server.fetches(), 1, "the first request asked the issuer");
}

/// A verifier whose fetch during init met an issuer answering 503, the
/// issuer since back, and the app it serves.
async fn after_a_failed_init(retry_interval: Duration) -> (JwksServer, TestApp) {
    let server = JwksServer::start(standard_jwks()).await;
    server.serve(|served| served.status = 503);
    let verifier = verifier(&server, quick(|policy| policy.retry_interval = retry_interval));
    let app = TestApp::with_authenticator(Authenticator::with_jwt(verifier.clone())).await;

    assert_eq!(verifier.prepare().await, Ok(()));
    assert_eq!(server.fetches(), 1);
    server.serve(|served| served.status = 200);
    (server, app)
}

#[tokio::test]
async fn an_issuer_out_of_reach_during_init_is_no_reason_not_to_start_and_requests_fetch_later() {
    // Within the retry interval of the failed fetch: no new one yet. An
    // hour, so that however slowly this runs, it is within.
    let (server, app) = after_a_failed_init(HOUR).await;
    let response = app.send(request(&Jwt::rs256().encode(), 1)).await;
    assert_outcome(
        &app,
        &response,
        1,
        Expect::Unavailable,
        "within the retry interval",
    )
    .await;
    assert_eq!(server.fetches(), 1);

    // Past it: the request fetches, and is served.
    let retry_interval = Duration::from_millis(100);
    let (server, app) = after_a_failed_init(retry_interval).await;
    tokio::time::sleep(retry_interval).await;
    let response = app.send(request(&Jwt::rs256().encode(), 2)).await;
    assert_outcome(&app, &response, 2, Expect::Created, "after it").await;
    assert_eq!(server.fetches(), 2);
}

/// A JWKS server whose discovery document names `issuer` (`None`: itself)
/// and `jwks_uri` (`None`: its own JWKS).
async fn issuer(issuer: Option<&str>, jwks_uri: Option<&str>) -> JwksServer {
    let server = JwksServer::start(standard_jwks()).await;
    let issuer = issuer.map_or_else(|| server.base_url.clone(), str::to_owned);
    let jwks_uri = jwks_uri.map(str::to_owned);
    server.serve(|served| {
        served.discovery_issuer = Some(issuer);
        served.discovery_jwks_uri = jwks_uri;
    });
    server
}

fn discovering(server: &JwksServer) -> JwtVerifier {
    let settings = JwtSettings::new(&server.base_url, &[AUDIENCE], None, SCOPE).expect("valid settings");
    JwtVerifier::with_policy(settings, patient())
}

#[tokio::test]
async fn a_discovery_document_that_contradicts_the_settings_is_an_error_during_init() {
    let cases = [
        (
            issuer(None, Some("http://issuer.example/jwks.json")).await,
            r#"gives the jwks_uri "http://issuer.example/jwks.json", which is not an https URL"#,
        ),
        (
            issuer(Some("https://attacker.example"), None).await,
            r#"names the issuer "https://attacker.example", not PLANTS_JWT_ISSUER"#,
        ),
    ];
    for (server, expected) in cases {
        let error = discovering(&server)
            .prepare()
            .await
            .expect_err(expected)
            .to_string();
        assert!(error.contains(expected), "{error}");
        assert!(error.contains(&server.base_url), "names the document: {error}");
        assert_eq!(server.fetches(), 0, "{expected}: the JWKS was fetched");
    }
}

/// Runs the built function, with JWTs from `issuer` on, under a stand-in
/// Runtime API that has no invocation for it, until it exits: what it
/// printed and the Runtime API. The store is never reached.
async fn run_the_function(issuer: &str) -> (Output, FakeRuntimeApi) {
    let api = FakeRuntimeApi::start(Vec::new());
    let mut command = function(&api.address, "http://127.0.0.1:9");
    command.envs([("PLANTS_JWT_ISSUER", issuer), ("PLANTS_JWT_AUDIENCE", AUDIENCE)]);
    // Off this runtime's thread, which serves the issuer meanwhile.
    let output = tokio::task::spawn_blocking(move || command.output().expect("the function binary runs"))
        .await
        .expect("the function's run");
    (output, api)
}

fn printed(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test]
async fn the_built_function_fetches_the_keys_during_init() {
    let server = issuer(None, None).await;

    let (output, api) = run_the_function(&server.base_url).await;

    let text = printed(&output);
    assert!(
        !api.nexts().is_empty(),
        "it never asked for an invocation: {text}"
    );
    // It was given no invocation: what it fetched, it fetched during init.
    assert_eq!((server.discovery_fetches(), server.fetches()), (1, 1), "{text}");
    assert!(!text.contains("issuer's keys"), "{text}");
}

#[tokio::test]
async fn the_built_function_starts_when_the_issuer_is_out_of_reach_during_init() {
    let server = issuer(None, None).await;
    server.serve(|served| served.status = 503);

    let (output, api) = run_the_function(&server.base_url).await;

    let text = printed(&output);
    assert!(
        !api.nexts().is_empty(),
        "it never asked for an invocation: {text}"
    );
    assert!(
        text.contains("could not fetch the issuer's keys during init; starting anyway"),
        "{text}"
    );
}

#[tokio::test]
async fn the_built_function_refuses_to_start_when_the_discovered_jwks_uri_is_not_https() {
    let server = issuer(None, Some("http://issuer.example/jwks.json")).await;

    let (output, api) = run_the_function(&server.base_url).await;

    let text = printed(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    let expected = format!(
        "refusing to start: the issuer's discovery document {}/.well-known/openid-configuration \
         gives the jwks_uri \"http://issuer.example/jwks.json\", which is not an https URL",
        server.base_url
    );
    assert!(text.contains(&expected), "{text}");
    assert!(text.contains("set PLANTS_JWT_JWKS_URL"), "{text}");
    let posted = api.next_post();
    assert_eq!(posted.path, "/2018-06-01/runtime/init/error");
    let message = posted.body["errorMessage"].as_str().unwrap_or_default();
    assert!(message.starts_with(&expected), "{message}");
    assert!(api.nexts().is_empty(), "it asked for an invocation");
    assert_eq!(server.fetches(), 0);
}
