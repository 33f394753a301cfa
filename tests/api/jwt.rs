//! JWT access tokens through the real handler and DynamoDB Local. The keys
//! (RSA 2048, P-256) are generated when the tests start and the JWKS is
//! served by the test itself on loopback, so the tests can switch it off,
//! count its fetches, rotate its keys and make it misbehave.

use std::fmt::Write as _;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lc_rs::hmac;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, RSA_PKCS1_SHA256, RSA_PKCS1_SHA512, RsaKeyPair,
    RsaPublicKeyComponents,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use lambda_http::tracing;
use plant_store::auth::Authenticator;
use plant_store::auth::jwt::{JwksPolicy, JwtSettings, JwtVerifier};
use plant_store::config::Config;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::helpers::{Captured, DEV_TOKEN, Event, TestApp, TestResponse, assert_item};
use crate::startup::start_the_function;

/// Not fetched: the tests configure `PLANTS_JWT_JWKS_URL`, except where
/// discovery itself is tested.
const ISSUER: &str = "https://issuer.example/pool";
const AUDIENCE: &str = "https://plants.example";
/// Accepted as an audience too, as a Cognito app client id would be.
const CLIENT_ID: &str = "app-client-1";
const SCOPE: &str = "plants:write";
const OCT_SECRET: &[u8] = b"a shared secret that the JWKS gives to everyone";

// ---------------------------------------------------------------------------
// Keys and tokens.

struct Keys {
    rsa: RsaKeyPair,
    rsa_next: RsaKeyPair,
    ec: EcdsaKeyPair,
}

/// Generated once per test binary: RSA key generation is the slow part.
fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| Keys {
        rsa: RsaKeyPair::generate(KeySize::Rsa2048).expect("RSA 2048 key"),
        rsa_next: RsaKeyPair::generate(KeySize::Rsa2048).expect("RSA 2048 key"),
        ec: EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).expect("P-256 key"),
    })
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn rsa_jwk(key: &RsaKeyPair, kid: &str) -> Value {
    let public = RsaPublicKeyComponents::<Vec<u8>>::from(key.public_key());
    json!({ "kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64(&public.n), "e": b64(&public.e) })
}

fn ec_jwk(key: &EcdsaKeyPair, kid: &str) -> Value {
    let point = key.public_key().as_ref();
    json!({ "kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
            "x": b64(&point[1..33]), "y": b64(&point[33..]) })
}

fn oct_jwk(kid: &str) -> Value {
    json!({ "kty": "oct", "kid": kid, "alg": "HS256", "k": b64(OCT_SECRET) })
}

fn jwks(keys: &[Value]) -> String {
    json!({ "keys": keys }).to_string()
}

/// rsa-1 (RS256), ec-1 (ES256) and an HMAC secret for everyone (oct-1).
fn standard_keys() -> Vec<Value> {
    vec![
        rsa_jwk(&keys().rsa, "rsa-1"),
        ec_jwk(&keys().ec, "ec-1"),
        oct_jwk("oct-1"),
    ]
}

fn standard_jwks() -> String {
    jwks(&standard_keys())
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
        .try_into()
        .expect("an i64 timestamp")
}

#[derive(Clone)]
enum Signing {
    Rs256(&'static RsaKeyPair),
    Rs512(&'static RsaKeyPair),
    Es256(&'static EcdsaKeyPair),
    Hs256(Vec<u8>),
    Unsigned,
}

/// A token under construction: a good RS256 access token unless changed.
#[derive(Clone)]
struct Jwt {
    header: Value,
    claims: Value,
    signing: Signing,
    tamper: bool,
}

impl Jwt {
    fn rs256() -> Self {
        let now = now();
        Self {
            header: json!({ "alg": "RS256", "typ": "at+jwt", "kid": "rsa-1" }),
            claims: json!({
                "iss": ISSUER, "sub": "user-1", "aud": AUDIENCE, "scope": format!("openid {SCOPE}"),
                "iat": now, "nbf": now, "exp": now + 300, "jti": "token-1",
            }),
            signing: Signing::Rs256(&keys().rsa),
            tamper: false,
        }
    }

    fn es256() -> Self {
        Self::rs256()
            .header("alg", json!("ES256"))
            .header("kid", json!("ec-1"))
            .signed(Signing::Es256(&keys().ec))
    }

    /// Sets a header parameter; `Value::Null` removes it.
    fn header(mut self, name: &str, value: Value) -> Self {
        set(&mut self.header, name, value);
        self
    }

    /// Sets a claim; `Value::Null` removes it.
    fn claim(mut self, name: &str, value: Value) -> Self {
        set(&mut self.claims, name, value);
        self
    }

    fn signed(mut self, signing: Signing) -> Self {
        self.signing = signing;
        self
    }

    /// Changes the claims after signing, keeping the signature.
    fn tampered(mut self) -> Self {
        self.tamper = true;
        self
    }

    fn encode(&self) -> String {
        let input = format!(
            "{}.{}",
            b64(self.header.to_string().as_bytes()),
            b64(self.claims.to_string().as_bytes())
        );
        let rng = SystemRandom::new();
        let signature = match &self.signing {
            Signing::Rs256(key) | Signing::Rs512(key) => {
                let padding = match self.signing {
                    Signing::Rs512(_) => &RSA_PKCS1_SHA512,
                    _ => &RSA_PKCS1_SHA256,
                };
                let mut signature = vec![0; key.public_modulus_len()];
                key.sign(padding, &rng, input.as_bytes(), &mut signature)
                    .expect("RSA signature");
                signature
            }
            Signing::Es256(key) => key
                .sign(&rng, input.as_bytes())
                .expect("ECDSA signature")
                .as_ref()
                .to_vec(),
            Signing::Hs256(secret) => {
                hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, secret), input.as_bytes())
                    .as_ref()
                    .to_vec()
            }
            Signing::Unsigned => Vec::new(),
        };
        let input = if self.tamper {
            let mut claims = self.claims.clone();
            claims["sub"] = json!("admin");
            format!(
                "{}.{}",
                b64(self.header.to_string().as_bytes()),
                b64(claims.to_string().as_bytes())
            )
        } else {
            input
        };
        format!("{input}.{}", b64(&signature))
    }
}

fn set(object: &mut Value, name: &str, value: Value) {
    let object = object.as_object_mut().expect("a JSON object");
    if value.is_null() {
        object.remove(name);
    } else {
        object.insert(name.to_owned(), value);
    }
}

// ---------------------------------------------------------------------------
// The JWKS server.

/// What the JWKS server answers, changeable while it runs.
#[derive(Clone)]
struct Served {
    jwks: String,
    status: u16,
    cache_control: Option<String>,
    delay: Duration,
    content_length: bool,
    /// Close the connection without answering.
    reset: bool,
    /// The `issuer` of the discovery document; its `jwks_uri` is ours.
    discovery_issuer: Option<String>,
}

struct Shared {
    served: Mutex<Served>,
    jwks_fetches: AtomicUsize,
    discovery_fetches: AtomicUsize,
}

/// An HTTP/1.1 server on loopback, one response per connection.
pub(crate) struct JwksServer {
    base_url: String,
    shared: Arc<Shared>,
}

impl JwksServer {
    async fn start(jwks: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let base_url = format!("http://{}", listener.local_addr().expect("an address"));
        let shared = Arc::new(Shared {
            served: Mutex::new(Served {
                jwks,
                status: 200,
                cache_control: None,
                delay: Duration::ZERO,
                content_length: true,
                reset: false,
                discovery_issuer: None,
            }),
            jwks_fetches: AtomicUsize::new(0),
            discovery_fetches: AtomicUsize::new(0),
        });
        tokio::spawn(serve(listener, Arc::clone(&shared), base_url.clone()));
        Self { base_url, shared }
    }

    fn jwks_url(&self) -> String {
        format!("{}/jwks.json", self.base_url)
    }

    fn serve(&self, change: impl FnOnce(&mut Served)) {
        change(&mut self.shared.served.lock().expect("server state"));
    }

    fn fetches(&self) -> usize {
        self.shared.jwks_fetches.load(Ordering::SeqCst)
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>, base_url: String) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(answer(stream, Arc::clone(&shared), base_url.clone()));
    }
}

async fn answer(mut stream: TcpStream, shared: Arc<Shared>, base_url: String) -> io::Result<()> {
    let mut head = Vec::new();
    let mut buffer = [0; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        match stream.read(&mut buffer).await? {
            0 => return Ok(()),
            read => head.extend_from_slice(&buffer[..read]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
    let served = shared.served.lock().expect("server state").clone();
    let (status, body) = match path.as_str() {
        "/jwks.json" => {
            shared.jwks_fetches.fetch_add(1, Ordering::SeqCst);
            (served.status, served.jwks.clone())
        }
        "/.well-known/openid-configuration" => {
            shared.discovery_fetches.fetch_add(1, Ordering::SeqCst);
            let issuer = served.discovery_issuer.clone().unwrap_or_default();
            let document = json!({ "issuer": issuer, "jwks_uri": format!("{base_url}/jwks.json") });
            (served.status, document.to_string())
        }
        _ => (404, String::new()),
    };
    tokio::time::sleep(served.delay).await;
    if served.reset {
        return Ok(());
    }
    let mut response =
        format!("HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nConnection: close\r\n");
    if let Some(cache_control) = &served.cache_control {
        let _ = write!(response, "Cache-Control: {cache_control}\r\n");
    }
    if served.content_length {
        let _ = write!(response, "Content-Length: {}\r\n", body.len());
    }
    response.push_str("\r\n");
    response.push_str(&body);
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

// ---------------------------------------------------------------------------
// The function under test.

fn verifier(server: &JwksServer, policy: JwksPolicy) -> JwtVerifier {
    let settings = JwtSettings::new(ISSUER, &[AUDIENCE, CLIENT_ID], Some(&server.jwks_url()), SCOPE)
        .expect("valid settings");
    JwtVerifier::with_policy(settings, policy).expect("an HTTP client")
}

/// For other test modules: a verifier of this module's issuer, with its
/// JWKS served on loopback (keep the server alive), and a token it accepts
/// that lacks the required scope, i.e. the 403.
pub(crate) async fn verifier_and_token_without_scope() -> (JwksServer, JwtVerifier, String) {
    let server = JwksServer::start(standard_jwks()).await;
    let verifier = verifier(&server, JwksPolicy::default());
    let token = Jwt::rs256().claim("scope", json!("openid")).encode();
    (server, verifier, token)
}

async fn app(server: &JwksServer, policy: JwksPolicy) -> TestApp {
    TestApp::with_authenticator(Authenticator::with_jwt(verifier(server, policy))).await
}

fn request(token: &str, id: i64) -> lambda_http::Request {
    Event::load("create-http-api.json")
        .body(&json!({ "id": id, "name": format!("plant {id}") }).to_string())
        .header("authorization", Some(&format!("Bearer {token}")))
        .request()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Created,
    /// 401 40102
    InvalidToken,
    /// 401 40101
    NoCredentials,
    /// 403 40301
    InsufficientScope,
    /// 503 50301
    Unavailable,
}

/// The exact status, body and challenge headers of each outcome, and that
/// nothing but a created plant reaches the table.
async fn assert_outcome(app: &TestApp, response: &TestResponse, id: i64, expect: Expect, case: &str) {
    response.assert_standard_headers();
    let challenge = response.header("www-authenticate");
    let retry_after = response.header("retry-after");
    let (status, body, expected_challenge, expected_retry) = match expect {
        Expect::Created => (200, json!({ "name": format!("plant {id}") }), None, None),
        Expect::InvalidToken => (
            401,
            json!({ "error": 40102, "message": "invalid bearer token" }),
            Some(r#"Bearer realm="plants", error="invalid_token""#),
            None,
        ),
        Expect::NoCredentials => (
            401,
            json!({ "error": 40101, "message": "missing bearer token" }),
            Some(r#"Bearer realm="plants""#),
            None,
        ),
        Expect::InsufficientScope => (
            403,
            json!({ "error": 40301, "message": "token lacks the required scope `plants:write`" }),
            Some(r#"Bearer realm="plants", error="insufficient_scope", scope="plants:write""#),
            None,
        ),
        Expect::Unavailable => (
            503,
            json!({ "error": 50301, "message": "the token cannot be verified right now; retry later" }),
            None,
            Some("1"),
        ),
    };
    assert_eq!(
        (response.status, &response.body, challenge, retry_after),
        (status, &body, expected_challenge, expected_retry),
        "{case}"
    );
    match (expect, app.stored(id).await) {
        (Expect::Created, Some(item)) => assert_item(&item, id, &format!("plant {id}"), None),
        (Expect::Created, None) => panic!("{case}: plant {id} was not stored"),
        (_, Some(item)) => panic!("{case}: a refused request stored {item:?}"),
        (_, None) => {}
    }
}

// ---------------------------------------------------------------------------
// Tokens.

#[tokio::test]
async fn every_kind_of_token_gets_its_documented_answer() {
    use Expect::{Created, InsufficientScope, InvalidToken, NoCredentials};
    let server = JwksServer::start(standard_jwks()).await;
    let app = app(&server, JwksPolicy::default()).await;
    let now = now();
    let rsa_public_key = keys().rsa.public_key().as_ref().to_vec();
    // A good RS256 access token with one header parameter or claim changed
    // (`Value::Null` removes it).
    let header = |name: &str, value: Value| Jwt::rs256().header(name, value);
    let claim = |name: &str, value: Value| Jwt::rs256().claim(name, value);

    let accepted = vec![
        ("a good RS256 token", Jwt::rs256()),
        ("a good ES256 token", Jwt::es256()),
        ("typ JWT", header("typ", json!("JWT"))),
        (
            "typ application/at+jwt",
            header("typ", json!("application/at+jwt")),
        ),
        ("no typ", header("typ", Value::Null)),
        ("aud among others", claim("aud", json!(["other", AUDIENCE]))),
        (
            "no aud but a matching client_id (Cognito)",
            claim("aud", Value::Null)
                .claim("client_id", json!(CLIENT_ID))
                .claim("token_use", json!("access")),
        ),
        (
            "the scope in scp as an array (Okta)",
            claim("scope", Value::Null).claim("scp", json!(["openid", SCOPE])),
        ),
        (
            "the scope in scp as a string (Entra ID)",
            claim("scope", Value::Null).claim("scp", json!(format!("read {SCOPE}"))),
        ),
        ("expired, but within the leeway", claim("exp", json!(now - 10))),
        ("nbf within the leeway", claim("nbf", json!(now + 10))),
        ("iat within the leeway", claim("iat", json!(now + 10))),
    ];
    let invalid = vec![
        ("alg none", header("alg", json!("none")).signed(Signing::Unsigned)),
        ("alg noNE", header("alg", json!("noNE")).signed(Signing::Unsigned)),
        ("alg none with an RS256 signature", header("alg", json!("none"))),
        (
            "HS256 signed with the RSA public key as its secret",
            header("alg", json!("HS256")).signed(Signing::Hs256(rsa_public_key)),
        ),
        (
            "HS256 signed with the oct key of the JWKS",
            header("alg", json!("HS256"))
                .header("kid", json!("oct-1"))
                .signed(Signing::Hs256(OCT_SECRET.to_vec())),
        ),
        (
            "RS512, which is not allowed",
            header("alg", json!("RS512")).signed(Signing::Rs512(&keys().rsa)),
        ),
        (
            "ES256 under the kid of an RSA key",
            Jwt::es256().header("kid", json!("rsa-1")),
        ),
        ("RS256 under the kid of an EC key", header("kid", json!("ec-1"))),
        ("no kid", header("kid", Value::Null)),
        (
            "signed by another key",
            Jwt::rs256().signed(Signing::Rs256(&keys().rsa_next)),
        ),
        ("claims changed after signing", Jwt::rs256().tampered()),
        ("a critical header parameter", header("crit", json!(["exp"]))),
        ("expired", claim("exp", json!(now - 120))),
        ("nbf in the future", claim("nbf", json!(now + 120))),
        (
            "iat in the future beyond the leeway",
            claim("iat", json!(now + 120)),
        ),
        ("no exp", claim("exp", Value::Null)),
        ("exp as a string", claim("exp", json!((now + 300).to_string()))),
        ("nbf as a string", claim("nbf", json!(now.to_string()))),
        ("iat as a string", claim("iat", json!(now.to_string()))),
        (
            "a wrong issuer",
            claim("iss", json!("https://issuer.example/other")),
        ),
        (
            "the issuer with a trailing slash",
            claim("iss", json!(format!("{ISSUER}/"))),
        ),
        ("iss as an array", claim("iss", json!([ISSUER]))),
        ("no iss", claim("iss", Value::Null)),
        ("a wrong audience", claim("aud", json!("https://other.example"))),
        ("an empty aud array", claim("aud", json!([]))),
        (
            "a wrong aud beside a matching client_id",
            claim("aud", json!("https://other.example")).claim("client_id", json!(CLIENT_ID)),
        ),
        (
            "no aud and a wrong client_id",
            claim("aud", Value::Null).claim("client_id", json!("other-client")),
        ),
        ("neither aud nor client_id", claim("aud", Value::Null)),
        (
            "an ID token (Cognito: token_use id, aud is the client id)",
            claim("aud", json!(CLIENT_ID))
                .claim("token_use", json!("id"))
                .claim("scope", Value::Null),
        ),
        (
            "a typ that is not an access token's",
            header("typ", json!("dpop+jwt")),
        ),
    ];
    let lacking_the_scope = vec![
        ("no scope at all", claim("scope", Value::Null)),
        ("another scope", claim("scope", json!("openid plants:read"))),
        (
            "a scope that only starts with the required one",
            claim("scope", json!("plants:write-all")),
        ),
        ("the scope in another case", claim("scope", json!("PLANTS:WRITE"))),
    ];

    let cases = [
        (Created, accepted),
        (InvalidToken, invalid),
        (InsufficientScope, lacking_the_scope),
    ]
    .into_iter()
    .flat_map(|(expect, cases)| cases.into_iter().map(move |(case, jwt)| (case, jwt, expect)));
    let mut ids = 1..;
    for ((case, jwt, expect), id) in cases.zip(&mut ids) {
        let response = app.send(request(&jwt.encode(), id)).await;
        assert_outcome(&app, &response, id, expect, case).await;
    }
    // RFC 6750 §2.3's `access_token` query parameter, which we do not read.
    let id = ids.next().expect("an id");
    let in_the_query = Event::load("create-http-api.json")
        .body(&json!({ "id": id, "name": format!("plant {id}") }).to_string())
        .header("authorization", None)
        .query("access_token", &Jwt::rs256().encode())
        .request();
    let response = app.send(in_the_query).await;
    let case = "a good token in the query string instead of the header";
    assert_outcome(&app, &response, id, NoCredentials, case).await;
    assert_eq!(
        server.fetches(),
        1,
        "the keys are fetched once, and no refused token triggers a fetch"
    );
}

#[tokio::test]
async fn malformed_bearer_values_are_invalid_tokens_without_a_fetch() {
    let server = JwksServer::start(standard_jwks()).await;
    let app = app(&server, JwksPolicy::default()).await;
    let good = Jwt::rs256().encode();
    let (header, rest) = good.split_once('.').expect("a JWT");
    let payload = rest.split_once('.').expect("a JWT").0;
    let long = format!("{good}{}", "A".repeat(9000));

    let cases = [
        ("one segment", "abc".to_owned()),
        ("two segments", format!("{header}.{payload}")),
        ("four segments", format!("{good}.AAAA")),
        ("a JWE's five segments", format!("{good}.AAAA.AAAA")),
        ("a header that is not base64url JSON", format!("AAAA.{rest}")),
        ("longer than 8 KiB", long),
    ];
    for (id, (case, token)) in (1..).zip(cases) {
        let response = app.send(request(&token, id)).await;
        assert_outcome(&app, &response, id, Expect::InvalidToken, case).await;
    }
    assert_eq!(server.fetches(), 0);
}

// ---------------------------------------------------------------------------
// The key cache.

/// One step of a key-cache scenario.
enum Step {
    /// Sends the token and expects the outcome and the JWKS fetch count
    /// after it.
    Send(Jwt, Expect, usize),
    /// Changes what the JWKS server answers.
    Serve(fn(&mut Served)),
    /// Has the JWKS server send this `Cache-Control`.
    CacheControl(&'static str),
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

fn unknown_kid() -> Jwt {
    Jwt::rs256().header("kid", json!("rsa-unknown"))
}

fn rotated() -> Jwt {
    Jwt::rs256()
        .header("kid", json!("rsa-2"))
        .signed(Signing::Rs256(&keys().rsa_next))
}

fn quick(change: impl FnOnce(&mut JwksPolicy)) -> JwksPolicy {
    let mut policy = JwksPolicy::default();
    change(&mut policy);
    policy
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
    use Step::{CacheControl, Send, Serve, Sleep};
    let ms = Duration::from_millis;

    let scenarios: Vec<Scenario> = vec![
        (
            "an unknown kid triggers one refresh, then is refused, and no refresh follows within 10 s",
            JwksPolicy::default(),
            vec![
                Send(Jwt::rs256(), Created, 1),
                Send(unknown_kid(), InvalidToken, 2),
                Send(unknown_kid(), InvalidToken, 2),
                Send(unknown_kid().header("kid", json!("rsa-other")), InvalidToken, 2),
                Send(Jwt::rs256(), Created, 2),
            ],
        ),
        (
            "the refresh rate limit: one refresh per interval, however many unknown kids",
            quick(|policy| policy.refresh_interval = ms(1000)),
            vec![
                Send(Jwt::rs256(), Created, 1),
                Send(unknown_kid(), InvalidToken, 2),
                Send(unknown_kid(), InvalidToken, 2),
                Send(unknown_kid(), InvalidToken, 2),
                Sleep(ms(1100)),
                Send(unknown_kid(), InvalidToken, 3),
                Send(unknown_kid(), InvalidToken, 3),
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
            "the JWKS down with keys cached: the cached keys are used, an unknown kid is a 503",
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
            "cached keys are used while refreshes fail, but only for max_stale; then retries as if empty",
            JwksPolicy {
                max_stale: ms(1000),
                retry_interval: ms(500),
                ..expiring()
            },
            vec![
                CacheControl("max-age=0"),
                Send(Jwt::rs256(), Created, 1),
                Serve(|served| served.reset = true),
                Send(Jwt::rs256(), Created, 2),
                Sleep(ms(1100)),
                Send(Jwt::rs256(), Unavailable, 3),
                Serve(|served| served.reset = false),
                Send(Jwt::rs256(), Unavailable, 3),
                Sleep(ms(600)),
                Send(Jwt::rs256(), Created, 4),
            ],
        ),
        (
            "the JWKS down with nothing cached: 503, retried once per retry interval",
            quick(|policy| policy.retry_interval = ms(500)),
            vec![
                Serve(|served| served.status = 500),
                Send(Jwt::rs256(), Unavailable, 1),
                Send(Jwt::rs256(), Unavailable, 1),
                Send(Jwt::es256(), Unavailable, 1),
                Serve(|served| served.status = 200),
                Sleep(ms(600)),
                Send(Jwt::rs256(), Created, 2),
            ],
        ),
        (
            "the JWKS closing the connection with nothing cached",
            JwksPolicy::default(),
            vec![
                Serve(|served| served.reset = true),
                Send(Jwt::rs256(), Unavailable, 1),
            ],
        ),
        (
            "a JWKS slower than the timeout",
            quick(|policy| policy.timeout = ms(300)),
            vec![
                Serve(|served| served.delay = Duration::from_secs(2)),
                Send(Jwt::rs256(), Unavailable, 1),
            ],
        ),
        (
            "an oversized JWKS with a Content-Length",
            JwksPolicy::default(),
            vec![
                Serve(|served| served.jwks = padded_jwks(64 * 1024 + 1)),
                Send(Jwt::rs256(), Unavailable, 1),
            ],
        ),
        (
            "an oversized JWKS without a Content-Length",
            JwksPolicy::default(),
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
            JwksPolicy::default(),
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
            JwksPolicy::default(),
            vec![
                Serve(|served| served.jwks = "<html>maintenance</html>".into()),
                Send(Jwt::rs256(), Unavailable, 1),
            ],
        ),
        (
            "an oct key in the JWKS is never used, even for a token signed with it",
            JwksPolicy::default(),
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
        let app = app(&server, policy).await;
        for (id, step) in (1..).zip(steps) {
            match step {
                Send(jwt, expect, fetches) => {
                    let response = app.send(request(&jwt.encode(), id)).await;
                    let step = format!("{case}, step {id}");
                    assert_outcome(&app, &response, id, expect, &step).await;
                    assert_eq!(server.fetches(), fetches, "{step}: JWKS fetches");
                }
                Serve(change) => server.serve(change),
                CacheControl(header) => server.serve(|served| served.cache_control = Some(header.into())),
                Sleep(duration) => tokio::time::sleep(duration).await,
            }
        }
    }
}

#[tokio::test]
async fn a_slow_jwks_gives_a_503_at_the_timeout_not_later() {
    let server = JwksServer::start(standard_jwks()).await;
    server.serve(|served| served.delay = Duration::from_secs(5));
    let app = app(&server, JwksPolicy::default()).await;

    let started = Instant::now();
    let response = app.send(request(&Jwt::rs256().encode(), 1)).await;
    let elapsed = started.elapsed();

    assert_outcome(&app, &response, 1, Expect::Unavailable, "slow JWKS").await;
    assert!(
        elapsed >= Duration::from_millis(1400) && elapsed < Duration::from_millis(3000),
        "answered after {elapsed:?}; the timeout is 1.5 s"
    );
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
    let app = TestApp::with_authenticator(Authenticator::with_jwt(
        JwtVerifier::new(settings).expect("an HTTP client"),
    ))
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

    assert_eq!(server.shared.discovery_fetches.load(Ordering::SeqCst), 1);
    assert_eq!(server.fetches(), 1);
}

#[tokio::test]
async fn a_discovery_document_naming_another_issuer_is_not_trusted() {
    let server = JwksServer::start(standard_jwks()).await;
    let issuer = server.base_url.clone();
    server.serve(|served| served.discovery_issuer = Some("https://attacker.example".into()));
    let settings = JwtSettings::new(&issuer, &[AUDIENCE], None, SCOPE).expect("valid settings");
    let app = TestApp::with_authenticator(Authenticator::with_jwt(
        JwtVerifier::new(settings).expect("an HTTP client"),
    ))
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

// ---------------------------------------------------------------------------
// Configuration and logging.

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
    let app = app(&server, JwksPolicy::default()).await;

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
