//! JWT access tokens through the real handler and DynamoDB Local. The keys
//! (RSA 2048, P-256) are generated when the tests start and the JWKS is
//! served by the test itself on loopback, so the tests can switch it off,
//! count its fetches, rotate its keys, make it misbehave, and hold its
//! answers back until they release them: a request answered while the
//! issuer holds everything back did not wait for the issuer, however slow
//! the machine.

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
use tokio::sync::watch;

use crate::helpers::{Captured, DEV_TOKEN, Event, TestApp, TestResponse, assert_item};
use crate::startup::start_the_function;

mod configuration;
mod init;
mod key_cache;
mod key_fetch;
mod outbound;
mod tokens;

/// Not fetched: the tests configure `PLANTS_JWT_JWKS_URL`, except where
/// discovery itself is tested.
const ISSUER: &str = "https://issuer.example/pool";
const AUDIENCE: &str = "https://plants.example";
/// Accepted as an audience too, as a Cognito app client id would be.
const CLIENT_ID: &str = "app-client-1";
const SCOPE: &str = "plants:write";
const OCT_SECRET: &[u8] = b"a shared secret that the JWKS gives to everyone";
/// An interval no test outlives: what must not happen within an interval is
/// tested with this one, so that no delay of the machine can end it early.
const HOUR: Duration = Duration::from_secs(3600);
/// How long a test waits for something that must happen by itself before
/// it fails: only a hang comes near it.
const HANG: Duration = Duration::from_secs(30);

/// `future`, which must end by itself; a hang fails the test, saying `what`.
async fn promptly<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(HANG, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: still waiting after {HANG:?}"))
}

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
    /// The `issuer` of the discovery document.
    discovery_issuer: Option<String>,
    /// Its `jwks_uri`, when not ours.
    discovery_jwks_uri: Option<String>,
}

struct Shared {
    served: Mutex<Served>,
    /// The JWKS requests that have arrived, answered or not.
    jwks_fetches: watch::Sender<usize>,
    discovery_fetches: AtomicUsize,
    /// While `true`, every request that arrives waits for it to be `false`
    /// before it is answered.
    held: watch::Sender<bool>,
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
                discovery_jwks_uri: None,
            }),
            jwks_fetches: watch::Sender::new(0),
            discovery_fetches: AtomicUsize::new(0),
            held: watch::Sender::new(false),
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

    /// The JWKS requests that have arrived so far, answered or not.
    fn fetches(&self) -> usize {
        *self.shared.jwks_fetches.borrow()
    }

    /// Returns once `count` JWKS requests have arrived.
    async fn fetched(&self, count: usize) {
        let mut fetches = self.shared.jwks_fetches.subscribe();
        let arrived = fetches.wait_for(|&fetches| fetches >= count);
        let _ = promptly(&format!("JWKS request {count}"), arrived).await;
    }

    /// Answers nothing from now on (a request arriving is still counted)
    /// until `release`.
    fn hold(&self) {
        self.shared.held.send_replace(true);
    }

    /// Answers every request held back, and those to come.
    fn release(&self) {
        self.shared.held.send_replace(false);
    }

    fn discovery_fetches(&self) -> usize {
        self.shared.discovery_fetches.load(Ordering::SeqCst)
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
            shared.jwks_fetches.send_modify(|fetches| *fetches += 1);
            (served.status, served.jwks.clone())
        }
        "/.well-known/openid-configuration" => {
            shared.discovery_fetches.fetch_add(1, Ordering::SeqCst);
            let issuer = served.discovery_issuer.clone().unwrap_or_default();
            let jwks_uri =
                (served.discovery_jwks_uri.clone()).unwrap_or_else(|| format!("{base_url}/jwks.json"));
            let document = json!({ "issuer": issuer, "jwks_uri": jwks_uri });
            (served.status, document.to_string())
        }
        _ => (404, String::new()),
    };
    // The sender lives as long as `shared`, so this cannot fail.
    let _ = shared.held.subscribe().wait_for(|&held| !held).await;
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
    JwtVerifier::with_policy(settings, policy)
}

/// The default policy, except that a fetch never times out: the tests that
/// do not test the timeout are not at the mercy of a test process frozen
/// for a second and a half while its own JWKS stand-in answers.
fn patient() -> JwksPolicy {
    JwksPolicy {
        timeout: HOUR,
        ..JwksPolicy::default()
    }
}

/// The `patient` policy with `change` made.
fn quick(change: impl FnOnce(&mut JwksPolicy)) -> JwksPolicy {
    let mut policy = patient();
    change(&mut policy);
    policy
}

/// For other test modules: a verifier of this module's issuer, with its
/// JWKS served on loopback (keep the server alive), and a token it accepts
/// that lacks the required scope, i.e. the 403.
pub(crate) async fn verifier_and_token_without_scope() -> (JwksServer, JwtVerifier, String) {
    let server = JwksServer::start(standard_jwks()).await;
    let verifier = verifier(&server, patient());
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
