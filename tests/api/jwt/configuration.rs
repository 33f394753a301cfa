//! JWTs as the function's configuration sets them up: beside static tokens,
//! the debug log of a refusal, and settings that refuse to start.

use super::*;

/// The function as `Config` builds it from these variables, over a fresh table.
async fn configured_app(vars: &[(&str, &str)]) -> TestApp {
    let config = Config::from_lookup(|name| {
        vars.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).to_owned())
    })
    .expect("a valid configuration");
    TestApp::with_authenticator(config.authenticator).await
}

#[tokio::test]
async fn static_tokens_and_jwts_can_both_be_on_and_either_accepts() {
    let server = JwksServer::start(standard_jwks()).await;
    let down = JwksServer::start(standard_jwks()).await;
    down.serve(|served| served.status = 503);
    let digest = plant_store::auth::StaticTokens::digest_hex(DEV_TOKEN);
    let audiences = format!("{AUDIENCE},{CLIENT_ID}");
    let vars = |jwks_url| {
        [
            ("TABLE_NAME", "unused: the test app has its own table"),
            ("PLANTS_TOKEN_SHA256", digest.as_str()),
            ("PLANTS_JWT_ISSUER", ISSUER),
            ("PLANTS_JWT_AUDIENCE", audiences.as_str()),
            ("PLANTS_JWT_JWKS_URL", jwks_url),
        ]
    };
    let jwks_url = server.jwks_url();
    let app = configured_app(&vars(&jwks_url)).await;

    let cognito = Jwt::rs256()
        .claim("aud", Value::Null)
        .claim("client_id", json!(CLIENT_ID));
    let cases = [
        ("the static token", DEV_TOKEN.to_owned(), Expect::Created),
        ("a JWT", Jwt::rs256().encode(), Expect::Created),
        ("a Cognito access token", cognito.encode(), Expect::Created),
        (
            "a JWT without the scope",
            Jwt::rs256().claim("scope", Value::Null).encode(),
            Expect::InsufficientScope,
        ),
        ("neither", "not-a-known-token".to_owned(), Expect::InvalidToken),
        (
            "an expired JWT",
            Jwt::rs256().claim("exp", json!(now() - 3600)).encode(),
            Expect::InvalidToken,
        ),
    ];
    for (id, (case, token, expect)) in (1..).zip(cases) {
        let response = app.send(request(&token, id)).await;
        assert_outcome(&app, &response, id, expect, case).await;
    }

    // The issuer out of reach: the static token still works, and a JWT
    // that may well be fine is a 503, not a 401.
    let jwks_url = down.jwks_url();
    let app = configured_app(&vars(&jwks_url)).await;
    let response = app.send(request(DEV_TOKEN, 1)).await;
    assert_outcome(&app, &response, 1, Expect::Created, "static token, issuer down").await;
    let response = app.send(request(&Jwt::rs256().encode(), 2)).await;
    assert_outcome(&app, &response, 2, Expect::Unavailable, "JWT, issuer down").await;
    let response = app.send(request("not-a-known-token", 3)).await;
    assert_outcome(&app, &response, 3, Expect::InvalidToken, "not a JWT, issuer down").await;
}

#[tokio::test]
async fn the_reason_goes_to_the_debug_log_and_the_token_never_does() {
    let capture = Captured::default();
    let subscriber = tracing::subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(capture.clone())
        .finish();
    let _guard = tracing::dispatcher::set_default(&tracing::Dispatch::new(subscriber));
    // While only one dispatcher exists, tracing-core decides whether a
    // callsite is interesting from the dispatcher of the thread that hits
    // it first, which may be another test's thread with none. A second
    // registered dispatcher makes it ask every dispatcher, this one too.
    let _second = tracing::Dispatch::new(tracing::subscriber::fmt().with_writer(io::sink).finish());
    let server = JwksServer::start(standard_jwks()).await;
    let app = app(&server, patient()).await;

    let cases = [
        (Jwt::rs256().claim("exp", json!(now() - 3600)), "expired"),
        (Jwt::rs256().tampered(), "bad signature"),
        (
            Jwt::rs256().claim("aud", json!("https://other.example")),
            "wrong audience",
        ),
        (
            Jwt::rs256().claim("token_use", json!("id")),
            "not an access token",
        ),
        (
            Jwt::rs256().header("alg", json!("HS256")),
            "algorithm not allowed",
        ),
        (
            Jwt::rs256().claim("scope", Value::Null),
            "lacks the required scope",
        ),
    ];
    let mut tokens = Vec::new();
    for (id, (jwt, reason)) in (1..).zip(cases) {
        let token = jwt.encode();
        let response = app.send(request(&token, id)).await;
        assert!(
            matches!(response.status, 401 | 403),
            "{reason}: {}",
            response.status
        );
        let log = capture.text();
        assert!(log.contains(reason), "{reason} is not in the log:\n{log}");
        tokens.push(token);
    }

    let log = capture.text();
    for token in &tokens {
        for segment in token.split('.').filter(|segment| segment.len() > 8) {
            assert!(!log.contains(segment), "a token segment reached the log:\n{log}");
        }
    }
}

#[test]
fn the_built_function_refuses_to_start_with_an_unusable_jwt_setting_naming_the_variable() {
    let cases = [
        (
            vec![("PLANTS_JWT_ISSUER", ISSUER)],
            "PLANTS_JWT_AUDIENCE is not set",
        ),
        (
            vec![
                ("PLANTS_JWT_ISSUER", "http://issuer.example"),
                ("PLANTS_JWT_AUDIENCE", AUDIENCE),
            ],
            "PLANTS_JWT_ISSUER must be",
        ),
        (
            vec![
                ("PLANTS_JWT_ISSUER", ISSUER),
                ("PLANTS_JWT_AUDIENCE", AUDIENCE),
                ("PLANTS_JWT_SCOPE", "plants:write plants:read"),
            ],
            "PLANTS_JWT_SCOPE must be",
        ),
    ];
    for (vars, expected) in cases {
        let (code, text) = start_the_function(&[&[("TABLE_NAME", "plants")], vars.as_slice()].concat());
        assert_eq!(code, Some(1), "{vars:?}: {text}");
        assert_eq!(text.lines().count(), 1, "{vars:?}: {text}");
        assert!(text.contains(expected), "{vars:?}: {text}");
    }
}
