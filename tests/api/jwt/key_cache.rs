//! The key cache: when the JWKS is fetched again, what its `Cache-Control`
//! and the policy decide, a slow or failing JWKS, keys found through the
//! issuer's discovery document, refreshes behind requests that do not wait
//! for them, and requests dropped while they wait.
//!
//! No test judges by how long something took. What must not happen within
//! an interval is tested with an interval of an hour; what must happen once
//! it has passed, with a short one and a sleep at least as long, which a
//! slow machine can only lengthen. That a request did not wait for the
//! issuer shows as its answer while the issuer holds every answer back.

use lambda_host::deadline::RESPONSE_MARGIN;

use super::*;

/// One step of a key-cache scenario.
enum Step {
    /// Sends the token and expects the outcome and the JWKS fetch count
    /// after it.
    Send(Jwt, Expect, usize),
    /// Changes what the JWKS server answers.
    Serve(fn(&mut Served)),
    /// Has the JWKS server send this `Cache-Control`.
    CacheControl(&'static str),
    /// Fetches the keys as during init.
    Prepare,
    /// At least this long, from the end of the step before.
    Sleep(Duration),
}

/// A policy under which keys expire at once, so that every request wants a
/// refresh unless the JWKS's `Cache-Control` keeps them.
fn expiring() -> JwksPolicy {
    quick(|policy| {
        policy.min_ttl = Duration::ZERO;
        policy.refresh_interval = Duration::ZERO;
    })
}

/// The scenario `case`: three good tokens under a JWKS sent with
/// `Cache-Control: header` and an `expiring` policy, and the JWKS fetch
/// count after each.
fn cache_control(case: &'static str, header: &'static str, fetches: [usize; 3]) -> Scenario {
    let [first, second, third] = fetches;
    let steps = vec![
        Step::CacheControl(header),
        Step::Send(Jwt::rs256(), Expect::Created, first),
        Step::Send(Jwt::rs256(), Expect::Created, second),
        Step::Send(Jwt::es256(), Expect::Created, third),
    ];
    (case, expiring(), steps)
}

/// A key-cache scenario: its name, the cache's policy, and its steps.
type Scenario = (&'static str, JwksPolicy, Vec<Step>);

pub(super) fn unknown_kid() -> Jwt {
    Jwt::rs256().header("kid", json!("rsa-unknown"))
}

fn rotated() -> Jwt {
    Jwt::rs256()
        .header("kid", json!("rsa-2"))
        .signed(Signing::Rs256(&keys().rsa_next))
}

/// A JWKS of `size` bytes: the standard keys and a padding member.
fn padded_jwks(size: usize) -> String {
    let empty = json!({ "keys": standard_keys(), "padding": "" }).to_string();
    let padding = "x".repeat(size - empty.len());
    let padded = empty.replace(r#""padding":"""#, &format!(r#""padding":"{padding}""#));
    assert_eq!(padded.len(), size);
    padded
}

#[tokio::test]
async fn every_key_cache_situation_gets_its_documented_answer() {
    use Expect::{Created, InvalidToken, Unavailable};
    use Step::{CacheControl, Prepare, Send, Serve, Sleep};
    let ms = Duration::from_millis;

    let scenarios: Vec<Scenario> = vec![
        (
            "an unknown kid triggers one refresh, then is refused, and no refresh follows within the \
             refresh interval, however many unknown kids",
            quick(|policy| policy.refresh_interval = HOUR),
            vec![
                Send(Jwt::rs256(), Created, 1),
                Send(unknown_kid(), InvalidToken, 2),
                Send(unknown_kid(), InvalidToken, 2),
                Send(unknown_kid().header("kid", json!("rsa-other")), InvalidToken, 2),
                Send(unknown_kid(), InvalidToken, 2),
                Send(Jwt::rs256(), Created, 2),
            ],
        ),
        (
            "the refresh rate limit lifts once the interval has passed since the last refresh",
            quick(|policy| policy.refresh_interval = ms(200)),
            vec![
                Send(Jwt::rs256(), Created, 1),
                Send(unknown_kid(), InvalidToken, 2),
                Sleep(ms(200)),
                Send(unknown_kid(), InvalidToken, 3),
                Sleep(ms(200)),
                Send(unknown_kid(), InvalidToken, 4),
            ],
        ),
        (
            "key rotation: a new kid is accepted after the refresh, the old one still works",
            quick(|policy| policy.refresh_interval = ms(200)),
            vec![
                Send(Jwt::rs256(), Created, 1),
                Send(rotated(), InvalidToken, 2),
                Serve(|served| {
                    served.jwks = jwks(&[rsa_jwk(&keys().rsa, "rsa-1"), rsa_jwk(&keys().rsa_next, "rsa-2")])
                }),
                Sleep(ms(250)),
                Send(rotated(), Created, 3),
                Send(Jwt::rs256(), Created, 3),
            ],
        ),
        (
            "the JWKS down with keys cached: the cached keys are used (and refreshed behind the \
             request), an unknown kid is a 503",
            expiring(),
            vec![
                CacheControl("max-age=0"),
                Send(Jwt::rs256(), Created, 1),
                Serve(|served| served.status = 503),
                Send(Jwt::rs256(), Created, 2),
                Send(Jwt::es256(), Created, 3),
                Send(unknown_kid(), Unavailable, 4),
                Serve(|served| served.status = 200),
                Send(Jwt::rs256(), Created, 5),
                Send(unknown_kid(), InvalidToken, 6),
            ],
        ),
        (
            "cached keys are used while refreshes fail, within max_stale",
            expiring(),
            vec![
                CacheControl("max-age=0"),
                Send(Jwt::rs256(), Created, 1),
                Serve(|served| served.reset = true),
                Send(Jwt::rs256(), Created, 2),
                Send(Jwt::es256(), Created, 3),
            ],
        ),
        (
            "past max_stale the keys are not used: requests fetch as if nothing were cached, under the \
             retry interval and not the refresh interval",
            JwksPolicy {
                max_stale: ms(100),
                retry_interval: Duration::ZERO,
                refresh_interval: HOUR,
                ..expiring()
            },
            vec![
                CacheControl("max-age=0"),
                Prepare,
                Serve(|served| served.reset = true),
                Sleep(ms(100)),
                Send(Jwt::rs256(), Unavailable, 2),
                Send(Jwt::es256(), Unavailable, 3),
            ],
        ),
        (
            "the JWKS down with nothing cached: 503, and no fetch again within the retry interval",
            quick(|policy| policy.retry_interval = HOUR),
            vec![
                Serve(|served| served.status = 500),
                Send(Jwt::rs256(), Unavailable, 1),
                Send(Jwt::rs256(), Unavailable, 1),
                Send(Jwt::es256(), Unavailable, 1),
                Serve(|served| served.status = 200),
                Send(Jwt::rs256(), Unavailable, 1),
            ],
        ),
        (
            "the JWKS down with nothing cached: fetched again once the retry interval has passed",
            quick(|policy| policy.retry_interval = ms(200)),
            vec![
                Serve(|served| served.status = 500),
                Send(Jwt::rs256(), Unavailable, 1),
                Serve(|served| served.status = 200),
                Sleep(ms(200)),
                Send(Jwt::rs256(), Created, 2),
            ],
        ),
        (
            "the JWKS closing the connection with nothing cached",
            patient(),
            vec![
                Serve(|served| served.reset = true),
                Send(Jwt::rs256(), Unavailable, 1),
            ],
        ),
        (
            "a JWKS slower than the timeout",
            quick(|policy| policy.timeout = ms(300)),
            vec![
                Serve(|served| served.delay = HOUR),
                Send(Jwt::rs256(), Unavailable, 1),
            ],
        ),
        (
            "an oversized JWKS with a Content-Length",
            patient(),
            vec![
                Serve(|served| served.jwks = padded_jwks(64 * 1024 + 1)),
                Send(Jwt::rs256(), Unavailable, 1),
            ],
        ),
        (
            "an oversized JWKS without a Content-Length",
            patient(),
            vec![
                Serve(|served| {
                    served.jwks = padded_jwks(64 * 1024 + 1);
                    served.content_length = false;
                }),
                Send(Jwt::rs256(), Unavailable, 1),
            ],
        ),
        (
            "a JWKS of exactly the size cap",
            patient(),
            vec![
                Serve(|served| {
                    served.jwks = padded_jwks(64 * 1024);
                    served.content_length = false;
                }),
                Send(Jwt::rs256(), Created, 1),
            ],
        ),
        (
            "a JWKS that is not JSON",
            patient(),
            vec![
                Serve(|served| served.jwks = "<html>maintenance</html>".into()),
                Send(Jwt::rs256(), Unavailable, 1),
            ],
        ),
        (
            "an oct key in the JWKS is never used, even for a token signed with it",
            patient(),
            vec![
                Serve(|served| served.jwks = jwks(&[oct_jwk("rsa-1")])),
                Send(
                    Jwt::rs256()
                        .header("alg", json!("HS256"))
                        .signed(Signing::Hs256(OCT_SECRET.to_vec())),
                    InvalidToken,
                    0,
                ),
                Send(Jwt::rs256(), InvalidToken, 1),
            ],
        ),
        cache_control(
            "Cache-Control max-age keeps the keys without refetching",
            "public, max-age=3600",
            [1, 1, 1],
        ),
        cache_control(
            "Cache-Control no-cache (with a zero minimum) refetches every time",
            "no-cache",
            [1, 2, 3],
        ),
    ];

    for (case, policy, steps) in scenarios {
        let server = JwksServer::start(standard_jwks()).await;
        let verifier = verifier(&server, policy);
        let app = TestApp::with_authenticator(Authenticator::with_jwt(verifier.clone())).await;
        for (id, step) in (1..).zip(steps) {
            match step {
                Send(jwt, expect, fetches) => {
                    let response = app.send(request(&jwt.encode(), id)).await;
                    // A refresh behind the request counts once it has ended.
                    verifier.settled().await;
                    let step = format!("{case}, step {id}");
                    assert_outcome(&app, &response, id, expect, &step).await;
                    assert_eq!(server.fetches(), fetches, "{step}: JWKS fetches");
                }
                Serve(change) => server.serve(change),
                CacheControl(header) => server.serve(|served| served.cache_control = Some(header.into())),
                Prepare => verifier.prepare().await.expect("no misconfiguration"),
                Sleep(duration) => tokio::time::sleep(duration).await,
            }
        }
    }
}

#[tokio::test]
async fn a_jwks_that_never_answers_gives_a_503_at_the_timeout() {
    let server = JwksServer::start(standard_jwks()).await;
    server.hold();
    let policy = JwksPolicy::default();
    let timeout = policy.timeout;
    let app = app(&server, policy).await;

    let started = Instant::now();
    let response = promptly(
        "a request while the issuer never answers",
        app.send(request(&Jwt::rs256().encode(), 1)),
    )
    .await;
    let elapsed = started.elapsed();

    assert_outcome(&app, &response, 1, Expect::Unavailable, "silent JWKS").await;
    // A timer never ends early: it waited for the fetch's whole timeout.
    assert!(elapsed >= timeout, "answered after {elapsed:?}");
    assert_eq!(server.fetches(), 1);
}

#[tokio::test]
async fn concurrent_requests_share_one_fetch() {
    let server = JwksServer::start(standard_jwks()).await;
    server.serve(|served| served.delay = Duration::from_millis(200));
    // No rate limit, so only the sharing can keep the count down.
    let app = app(&server, quick(|policy| policy.refresh_interval = Duration::ZERO)).await;

    for (round, jwt, expected) in [(0, Jwt::rs256(), 200), (1, unknown_kid(), 401)] {
        let requests = (0..8).map(|n| request(&jwt.encode(), round * 100 + n)).collect();
        let responses = app.send_concurrently(requests).await;
        let statuses: Vec<u16> = responses.iter().map(|response| response.status).collect();
        assert_eq!(statuses, vec![expected; 8], "round {round}");
        assert_eq!(
            server.fetches(),
            round as usize + 1,
            "round {round}: JWKS fetches"
        );
    }
}

#[tokio::test]
async fn without_a_jwks_url_the_issuers_discovery_document_gives_it() {
    let server = JwksServer::start(standard_jwks()).await;
    let issuer = server.base_url.clone();
    server.serve(|served| served.discovery_issuer = Some(server.base_url.clone()));
    let settings = JwtSettings::new(&issuer, &[AUDIENCE], None, SCOPE).expect("valid settings");
    let app = TestApp::with_authenticator(Authenticator::with_jwt(JwtVerifier::with_policy(
        settings,
        patient(),
    )))
    .await;
    let token = Jwt::rs256().claim("iss", json!(issuer));

    for id in [1, 2] {
        let response = app.send(request(&token.encode(), id)).await;
        assert_outcome(&app, &response, id, Expect::Created, "discovered keys").await;
    }
    let response = app.send(request(&Jwt::rs256().encode(), 3)).await;
    assert_outcome(
        &app,
        &response,
        3,
        Expect::InvalidToken,
        "the configured issuer is not ours",
    )
    .await;

    assert_eq!(server.discovery_fetches(), 1);
    assert_eq!(server.fetches(), 1);
}

#[tokio::test]
async fn a_discovery_document_naming_another_issuer_is_not_trusted() {
    let server = JwksServer::start(standard_jwks()).await;
    let issuer = server.base_url.clone();
    server.serve(|served| served.discovery_issuer = Some("https://attacker.example".into()));
    let settings = JwtSettings::new(&issuer, &[AUDIENCE], None, SCOPE).expect("valid settings");
    let app = TestApp::with_authenticator(Authenticator::with_jwt(JwtVerifier::with_policy(
        settings,
        patient(),
    )))
    .await;

    let response = app
        .send(request(&Jwt::rs256().claim("iss", json!(issuer)).encode(), 1))
        .await;

    assert_outcome(
        &app,
        &response,
        1,
        Expect::Unavailable,
        "foreign discovery document",
    )
    .await;
    assert_eq!(server.fetches(), 0, "its jwks_uri is not fetched");
}

#[tokio::test]
async fn fresh_keys_are_used_without_waiting_for_the_issuer_and_not_refreshed() {
    // Fresh for an hour, so refreshed behind requests only after 45 minutes.
    let server = JwksServer::start(standard_jwks()).await;
    server.serve(|served| served.cache_control = Some("max-age=3600".into()));
    // A fetch never times out (`patient`): a request that waited for one
    // would wait until the issuer is released, which never comes.
    let verifier = verifier(&server, quick(|policy| policy.min_ttl = Duration::ZERO));
    let app = TestApp::with_authenticator(Authenticator::with_jwt(verifier.clone())).await;
    verifier
        .prepare()
        .await
        .expect("the keys, fetched as during init");
    server.hold();

    let response = promptly(
        "a request with fresh keys",
        app.send(request(&Jwt::rs256().encode(), 1)),
    )
    .await;

    assert_outcome(&app, &response, 1, Expect::Created, "fresh keys").await;
    server.release();
    verifier.settled().await;
    assert_eq!(server.fetches(), 1, "fresh keys are not refreshed");
}

#[tokio::test]
async fn keys_near_the_end_of_their_freshness_are_refreshed_behind_a_request_that_does_not_wait() {
    // Fresh for 3 s, so refreshed behind requests from 2.25 s on.
    let server = JwksServer::start(standard_jwks()).await;
    server.serve(|served| served.cache_control = Some("max-age=3".into()));
    // A fetch never times out (`patient`): a request that waited for one
    // would wait until the issuer is released, and that comes after its
    // answer.
    let verifier = verifier(&server, quick(|policy| policy.min_ttl = Duration::ZERO));
    let app = TestApp::with_authenticator(Authenticator::with_jwt(verifier.clone())).await;
    verifier
        .prepare()
        .await
        .expect("the keys, fetched as during init");
    // Read after the fetch: the keys are at least this old from here on.
    let fetched = Instant::now();
    // From now on the issuer has a new key, and answers nothing until
    // released.
    server.serve(|served| {
        served.jwks = jwks(&[rsa_jwk(&keys().rsa, "rsa-1"), rsa_jwk(&keys().rsa_next, "rsa-2")]);
    });
    server.hold();

    // From here on the keys are in their last quarter, or past it if this
    // machine is slow, which takes the same path.
    tokio::time::sleep_until((fetched + Duration::from_millis(2250)).into()).await;
    let response = promptly(
        "a request in the keys' last quarter",
        app.send(request(&Jwt::rs256().encode(), 1)),
    )
    .await;
    assert_outcome(&app, &response, 1, Expect::Created, "keys in their last quarter").await;
    server.fetched(2).await;
    server.release();
    verifier.settled().await;
    assert_eq!(server.fetches(), 2, "one refresh, behind the request");

    // What the refresh brought is in use: the new key needs no fetch.
    let response = app.send(request(&rotated().encode(), 2)).await;
    assert_outcome(&app, &response, 2, Expect::Created, "the new key").await;
    assert_eq!(server.fetches(), 2);
}

#[tokio::test]
async fn keys_past_their_freshness_are_used_at_once_and_refreshed_behind_the_request() {
    let server = JwksServer::start(standard_jwks()).await;
    // A fetch never times out (`patient`): a request that waited for one
    // would wait until the issuer is released, and that comes after its
    // answer.
    let verifier = verifier(&server, expiring());
    let app = TestApp::with_authenticator(Authenticator::with_jwt(verifier.clone())).await;
    server.serve(|served| served.cache_control = Some("max-age=0".into()));
    verifier
        .prepare()
        .await
        .expect("the keys, fetched as during init");

    for id in [1, 2] {
        // The issuer answers nothing until released.
        server.hold();
        let response = promptly(
            &format!("request {id} with stale keys"),
            app.send(request(&Jwt::es256().encode(), id)),
        )
        .await;
        assert_outcome(&app, &response, id, Expect::Created, "stale keys").await;
        server.fetched(id as usize + 1).await;
        server.release();
        verifier.settled().await;
        assert_eq!(
            server.fetches(),
            id as usize + 1,
            "request {id}: a refresh behind it"
        );
    }
}

#[tokio::test]
async fn a_request_dropped_while_it_waits_for_the_keys_loses_no_fetch_and_holds_up_no_other() {
    let server = JwksServer::start(standard_jwks()).await;
    // The issuer answers nothing until released, and the fetch never
    // times out (`patient`): only the release ends it.
    server.hold();
    let app = app(&server, patient()).await;

    // The first request starts the fetch and is dropped while it waits, as
    // the invocation's deadline drops a request.
    let mut first = Box::pin(app.send(request(&Jwt::rs256().encode(), 1)));
    tokio::select! {
        biased;
        response = &mut first => panic!("the first request was answered ({}) before the issuer", response.status),
        () = server.fetched(1) => {}
    }
    drop(first);
    // The second arrives meanwhile and, polled once, waits for the same
    // fetch; then the issuer answers.
    let mut second = Box::pin(app.send(request(&Jwt::rs256().encode(), 2)));
    tokio::select! {
        biased;
        response = &mut second => panic!("the second request was answered ({}) before the issuer", response.status),
        () = std::future::ready(()) => {}
    }
    server.release();
    let second = promptly("the request beside a dropped one", second).await;

    assert_eq!(app.stored(1).await, None, "the dropped request stored a plant");
    assert_outcome(&app, &second, 2, Expect::Created, "beside a dropped request").await;
    assert_eq!(
        server.fetches(),
        1,
        "the dropped request's fetch went on, and served the other"
    );
    let response = app.send(request(&Jwt::es256().encode(), 3)).await;
    assert_outcome(&app, &response, 3, Expect::Created, "after both").await;
    assert_eq!(server.fetches(), 1);
}

#[tokio::test]
async fn a_request_whose_deadline_comes_while_it_waits_for_the_issuer_gets_a_50302_before_it() {
    let server = JwksServer::start(standard_jwks()).await;
    // The issuer never answers, and the fetch never times out (`patient`):
    // only the deadline can end the wait.
    server.hold();
    let app = app(&server, patient()).await;
    // Tokio's clock stands still and jumps to the next timer whenever
    // nothing else can run, so the handler's cut fires exactly when it is
    // due, and the answer's time is read on that clock. The cut is set
    // from the invocation's deadline, which is wall-clock time: the
    // deadline lies far enough ahead (an hour of waiting costs nothing on
    // a paused clock, but the test's own HANG would fire first) that no
    // stall of the machine before the handler reads the clocks changes
    // what it does, and the two clocks are read here once, together, to
    // place the deadline on the monotonic line the cut is on.
    tokio::time::pause();
    let wall = SystemTime::now();
    let on_the_clock = std::time::Instant::now();
    let now_ms = wall.duration_since(UNIX_EPOCH).expect("after 1970").as_millis();
    let mut context = lambda_http::Context::default();
    context.request_id = "deadline-at-the-issuer".to_owned();
    context.deadline = u64::try_from(now_ms).expect("fits") + 10_000;
    let deadline = UNIX_EPOCH + Duration::from_millis(context.deadline);
    let deadline_on_the_clock = on_the_clock + deadline.duration_since(wall).expect("ahead");
    let cut = deadline_on_the_clock - RESPONSE_MARGIN;

    let handled = app.app.handle(lambda_http::RequestExt::with_lambda_context(
        request(&Jwt::rs256().encode(), 1),
        context,
    ));
    let response: crate::fuzz_targets::JsonResponse =
        promptly("a request whose deadline comes", handled).await.into();
    let answered = tokio::time::Instant::now().into_std();
    tokio::time::resume();

    assert_eq!(response.status, 503);
    assert_eq!(response.header("retry-after"), Some("1"));
    assert_eq!(
        response.body,
        json!({ "error": 50302, "message": "the request could not be completed in time; retry it (a retry of the same create is safe)" })
    );
    // At its cut, RESPONSE_MARGIN before the deadline, to the timer's
    // millisecond: not at the deadline (a margin of zero), not before the
    // cut (a handler that gave up early).
    let off = if answered > cut {
        answered - cut
    } else {
        cut - answered
    };
    assert!(
        off <= Duration::from_millis(2),
        "answered {off:?} {} its cut, {RESPONSE_MARGIN:?} before the deadline",
        if answered > cut { "after" } else { "before" }
    );
    assert_eq!(app.stored(1).await, None, "nothing was written");
}
