//! JWT access tokens from an OpenID Connect issuer: the signature against the
//! issuer's JWKS, then the claims, then the scope. Also owns the key cache
//! and the HTTP client that fills it.
//!
//! Stricter than API Gateway's JWT authorizer on purpose: only RS256 and
//! ES256; no symmetric key from the JWKS is ever used; a key's own `alg`
//! must match the token's; ID tokens (`token_use: id`, a foreign `typ`) and
//! tokens with `crit` header parameters are refused; `iat` in the future is
//! refused; the `iss` claim must be one string, equal to the issuer.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, DecodingKeyKind, Validation};
use lambda_http::http::header::{ACCEPT, CACHE_CONTROL, CONTENT_LENGTH, HeaderMap, USER_AGENT};
use lambda_http::http::{Request, StatusCode, Uri};
use lambda_http::tracing;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::auth::{TokenVerifier, Verdict};
use crate::error::Chain;

/// The scope a token needs when `PLANTS_JWT_SCOPE` is not set.
pub const DEFAULT_SCOPE: &str = "plants:write";

/// Clock skew allowed on `exp`, `nbf` and `iat`, in seconds. Half the 60 s
/// ceiling: enough for issuers with NTP, small enough that an expired
/// token is not worth replaying.
pub const LEEWAY_SECONDS: u64 = 30;

/// Larger tokens are refused before any parsing. Real access tokens are
/// 1 to 2 KiB; API Gateway caps all headers together at 10 KiB.
const MAX_TOKEN_BYTES: usize = 8 * 1024;

const USER_AGENT_VALUE: &str = concat!("plant-store/", env!("CARGO_PKG_VERSION"));

/// An `https` URL, or an `http` one whose host is a loopback address (tests
/// and issuers run on a developer's machine). No user info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchUrl(Uri);

impl FetchUrl {
    pub fn parse(text: &str) -> Option<Self> {
        let uri: Uri = text.parse().ok()?;
        let authority = uri.authority()?;
        if authority.as_str().contains('@') {
            return None;
        }
        let host = authority.host();
        let loopback = host.eq_ignore_ascii_case("localhost")
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        match uri.scheme_str() {
            Some("https") => Some(Self(uri)),
            Some("http") if loopback => Some(Self(uri)),
            _ => None,
        }
    }
}

impl fmt::Display for FetchUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Which setting of `JwtSettings::new` is unusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingError {
    /// Not an https URL (or http on loopback), or it has a query.
    Issuer,
    /// No audience at all.
    Audience,
    JwksUrl,
    /// Not one RFC 6749 scope token, so not safe in `WWW-Authenticate`.
    Scope,
}

/// What a token must satisfy, and where the keys come from.
#[derive(Debug, Clone)]
pub struct JwtSettings {
    issuer: String,
    discovery: FetchUrl,
    audiences: HashSet<String>,
    jwks_url: Option<FetchUrl>,
    scope: String,
}

impl JwtSettings {
    /// `issuer` is compared with `iss` exactly as given (Auth0's ends in
    /// `/`, Cognito's does not); its discovery document is
    /// `{issuer without trailing /}/.well-known/openid-configuration`.
    pub fn new(
        issuer: &str,
        audiences: &[&str],
        jwks_url: Option<&str>,
        scope: &str,
    ) -> Result<Self, SettingError> {
        let parsed = FetchUrl::parse(issuer).ok_or(SettingError::Issuer)?;
        if parsed.0.query().is_some() {
            return Err(SettingError::Issuer);
        }
        let discovery = FetchUrl::parse(&format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        ))
        .ok_or(SettingError::Issuer)?;
        let audiences: HashSet<String> = audiences.iter().map(|&audience| audience.to_owned()).collect();
        if audiences.is_empty() || audiences.iter().any(String::is_empty) {
            return Err(SettingError::Audience);
        }
        let jwks_url = jwks_url
            .map(|url| FetchUrl::parse(url).ok_or(SettingError::JwksUrl))
            .transpose()?;
        if !is_scope_token(scope) {
            return Err(SettingError::Scope);
        }
        Ok(Self {
            issuer: issuer.to_owned(),
            discovery,
            audiences,
            jwks_url,
            scope: scope.to_owned(),
        })
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    pub fn scope(&self) -> &str {
        &self.scope
    }

    fn validation(&self, algorithm: Algorithm) -> Validation {
        let mut validation = Validation::new(algorithm);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss"]);
        validation.set_issuer(&[&self.issuer]);
        // `aud` is checked by us: Cognito access tokens carry `client_id`
        // instead, and that must be checked just as strictly.
        validation.validate_aud = false;
        validation
    }
}

/// RFC 6749 §3.3 `scope-token`: `1*( %x21 / %x23-5B / %x5D-7E )`, which
/// is also exactly what may go inside a quoted `WWW-Authenticate` value.
fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

/// How the key cache talks to the issuer. `Default` is the production
/// policy; tests shorten the intervals rather than sleep through them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwksPolicy {
    /// While usable keys are cached, at most one refresh per interval,
    /// whatever triggers it (an unknown `kid`, keys past their freshness).
    /// The first load is not a refresh: a `kid` first seen just after it
    /// may refresh at once.
    pub refresh_interval: Duration,
    /// With no usable key at all, no fetch follows a failed one sooner than
    /// this; it matches the `Retry-After` of the 503 that goes out meanwhile.
    pub retry_interval: Duration,
    /// How long fetched keys are fresh when the response has no
    /// `Cache-Control: max-age`.
    pub default_ttl: Duration,
    /// `max-age` (and `no-cache`, `no-store`, read as 0) is clamped to
    /// `min_ttl..=max_ttl`.
    pub min_ttl: Duration,
    pub max_ttl: Duration,
    /// How long past their freshness keys are still used while refreshes
    /// fail. After that the function answers 503 until a fetch succeeds.
    pub max_stale: Duration,
    /// For one HTTP exchange, connection and whole body included.
    pub timeout: Duration,
    /// The largest discovery document or JWKS read, in bytes.
    pub max_bytes: usize,
}

impl Default for JwksPolicy {
    fn default() -> Self {
        Self {
            refresh_interval: Duration::from_secs(10),
            retry_interval: Duration::from_secs(u64::from(crate::error::RETRY_AFTER_SECONDS)),
            default_ttl: Duration::from_secs(10 * 60),
            min_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(60 * 60),
            max_stale: Duration::from_secs(60 * 60),
            timeout: Duration::from_millis(1500),
            max_bytes: 64 * 1024,
        }
    }
}

impl JwksPolicy {
    /// How long keys fetched with this `max-age` are fresh.
    fn ttl(&self, max_age: Option<Duration>) -> Duration {
        max_age
            .unwrap_or(self.default_ttl)
            .clamp(self.min_ttl, self.max_ttl.max(self.min_ttl))
    }
}

/// The HTTP client could not be set up (a broken TLS configuration).
#[derive(Debug)]
pub struct ClientError(rustls::Error);

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot set up TLS for fetching the issuer's keys: {}", self.0)
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Verifies JWT access tokens. Built once at start-up; clones share the
/// key cache and the HTTP client.
#[derive(Clone)]
pub struct JwtVerifier {
    inner: Arc<Inner>,
}

struct Inner {
    settings: JwtSettings,
    rs256: Validation,
    es256: Validation,
    keys: KeyCache,
}

impl fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let settings = &self.inner.settings;
        f.debug_struct("JwtVerifier")
            .field("issuer", &settings.issuer)
            .field("audiences", &settings.audiences)
            .field("scope", &settings.scope)
            .finish_non_exhaustive()
    }
}

impl JwtVerifier {
    pub fn new(settings: JwtSettings) -> Result<Self, ClientError> {
        Self::with_policy(settings, JwksPolicy::default())
    }

    pub fn with_policy(settings: JwtSettings, policy: JwksPolicy) -> Result<Self, ClientError> {
        // Name the backend rather than rely on feature detection, which
        // panics at the first verification if a second backend is ever
        // enabled. An `Err` means a provider is installed already: ours,
        // by an earlier verifier.
        let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
        let client = http_client(policy.timeout)?;
        let source = match &settings.jwks_url {
            Some(url) => JwksSource::Url(url.clone()),
            None => JwksSource::Discovery {
                document: settings.discovery.clone(),
                issuer: settings.issuer.clone(),
            },
        };
        Ok(Self {
            inner: Arc::new(Inner {
                rs256: settings.validation(Algorithm::RS256),
                es256: settings.validation(Algorithm::ES256),
                settings,
                keys: KeyCache {
                    source,
                    policy,
                    client,
                    state: RwLock::default(),
                    gate: tokio::sync::Mutex::new(()),
                },
            }),
        })
    }

    pub fn scope(&self) -> &str {
        &self.inner.settings.scope
    }

    async fn check(&self, token: &str) -> Result<(), Failure> {
        let inner = &*self.inner;
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Failure::Rejected("token too long"));
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| Failure::Rejected("malformed header, or an algorithm that is never accepted"))?;
        // The allow-list. Never `none` (it does not even parse), never HS*:
        // the JWKS is public, so a symmetric key from it is a key anyone has.
        let validation = match header.alg {
            Algorithm::RS256 => &inner.rs256,
            Algorithm::ES256 => &inner.es256,
            _ => return Err(Failure::Rejected("algorithm not allowed")),
        };
        if header.crit.is_some() {
            return Err(Failure::Rejected("critical header parameters are not supported"));
        }
        if !header.typ.as_deref().is_none_or(is_access_token_type) {
            return Err(Failure::Rejected("typ is not an access token type"));
        }
        let kid = header.kid.ok_or(Failure::Rejected("no kid"))?;
        let key = match inner.keys.key(&kid, header.alg).await {
            Lookup::Found(key) => key,
            Lookup::OtherAlgorithm => {
                return Err(Failure::Rejected("the kid names a key for another algorithm"));
            }
            Lookup::Unknown => return Err(Failure::Rejected("unknown kid")),
            Lookup::Unavailable => return Err(Failure::Unavailable),
        };
        let claims = jsonwebtoken::decode::<Claims>(token, &key, validation)
            .map_err(|err| Failure::Rejected(describe(err.kind())))?
            .claims;
        self.check_claims(&claims)
    }

    /// What `jsonwebtoken` leaves to us; it has checked the signature,
    /// `exp`, `nbf` and that `iss` is present and matches.
    fn check_claims(&self, claims: &Claims) -> Result<(), Failure> {
        let settings = &self.inner.settings;
        if claims.iss != settings.issuer {
            return Err(Failure::Rejected("wrong issuer"));
        }
        if claims
            .token_use
            .as_deref()
            .is_some_and(|token_use| token_use != "access")
        {
            return Err(Failure::Rejected("not an access token (token_use)"));
        }
        let audience_ok = match &claims.aud {
            // RFC 7519 §4.1.3: one of the audiences must be us.
            Some(aud) => aud.iter().any(|aud| settings.audiences.contains(aud)),
            // Cognito access tokens name the app client in `client_id`.
            None => claims
                .client_id
                .as_ref()
                .is_some_and(|client_id| settings.audiences.contains(client_id)),
        };
        if !audience_ok {
            return Err(Failure::Rejected("wrong audience"));
        }
        if claims
            .iat
            .is_some_and(|iat| iat > unix_now() + LEEWAY_SECONDS as f64)
        {
            return Err(Failure::Rejected("issued in the future"));
        }
        if !grants(claims, &settings.scope) {
            return Err(Failure::MissingScope);
        }
        Ok(())
    }
}

impl TokenVerifier for JwtVerifier {
    async fn verify(&self, token: &str) -> Verdict {
        match self.check(token).await {
            Ok(()) => Verdict::Accepted,
            Err(Failure::Rejected(reason)) => {
                tracing::debug!(reason, "JWT rejected");
                Verdict::Rejected
            }
            Err(Failure::MissingScope) => {
                tracing::debug!(scope = self.scope(), "JWT lacks the required scope");
                Verdict::InsufficientScope {
                    scope: self.scope().to_owned(),
                }
            }
            Err(Failure::Unavailable) => Verdict::Unavailable,
        }
    }
}

/// Why a token was not accepted. The reason is for the debug log only.
enum Failure {
    Rejected(&'static str),
    MissingScope,
    Unavailable,
}

/// The claims checked beyond `jsonwebtoken`'s own. Any of them with the
/// wrong JSON type (or twice) makes the token invalid.
#[derive(Deserialize)]
struct Claims {
    iss: String,
    aud: Option<OneOrMany>,
    client_id: Option<String>,
    token_use: Option<String>,
    scope: Option<String>,
    scp: Option<OneOrMany>,
    iat: Option<f64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn iter(&self) -> impl Iterator<Item = &String> {
        match self {
            Self::One(one) => std::slice::from_ref(one).iter(),
            Self::Many(many) => many.iter(),
        }
    }
}

/// Whether `scope` (space-separated, RFC 8693 §4.2) or `scp` (Entra ID: a
/// space-separated string; Okta: an array) grants `required`. Exact and
/// case-sensitive, like every OAuth scope comparison.
fn grants(claims: &Claims, required: &str) -> bool {
    let listed = |list: &str| list.split(' ').any(|scope| scope == required);
    claims.scope.as_deref().is_some_and(listed)
        || match &claims.scp {
            Some(OneOrMany::One(list)) => listed(list),
            Some(OneOrMany::Many(scopes)) => scopes.iter().any(|scope| scope == required),
            None => false,
        }
}

/// `at+jwt` (RFC 9068) or plain `JWT`, with or without the `application/`
/// prefix and in any case (RFC 7515 §4.1.9).
fn is_access_token_type(typ: &str) -> bool {
    let typ = match typ.get(..12) {
        Some(prefix) if prefix.eq_ignore_ascii_case("application/") => &typ[12..],
        _ => typ,
    };
    typ.eq_ignore_ascii_case("at+jwt") || typ.eq_ignore_ascii_case("jwt")
}

/// A fixed phrase per failure: `jsonwebtoken`'s own messages may quote
/// parts of the token.
fn describe(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidSignature => "bad signature",
        ErrorKind::ExpiredSignature => "expired",
        ErrorKind::ImmatureSignature => "not valid yet (nbf)",
        ErrorKind::InvalidIssuer => "wrong issuer",
        ErrorKind::MissingRequiredClaim(claim) if claim == "exp" => "no numeric exp",
        ErrorKind::MissingRequiredClaim(claim) if claim == "iss" => "no iss",
        ErrorKind::InvalidClaimFormat(_) => "a time claim is not a number",
        ErrorKind::InvalidAlgorithm => "algorithm does not match the key",
        ErrorKind::Json(_) | ErrorKind::Utf8(_) | ErrorKind::Base64(_) => "malformed token or claims",
        _ => "invalid token",
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

// ---------------------------------------------------------------------------
// The key cache.

/// The issuer's keys, shared by every request of this process.
///
/// A request whose `kid` is cached and fresh reads the keys under a short
/// read lock and never waits. Anything else (nothing cached, an unknown
/// `kid`, keys past their freshness) goes through `gate`, so concurrent
/// requests share one fetch: whoever gets the gate after a fetch has
/// completed uses its result instead of fetching again. Fetches are
/// rate-limited by `JwksPolicy`.
struct KeyCache {
    source: JwksSource,
    policy: JwksPolicy,
    client: HttpClient,
    state: RwLock<CacheState>,
    gate: tokio::sync::Mutex<()>,
}

enum JwksSource {
    Url(FetchUrl),
    Discovery { document: FetchUrl, issuer: String },
}

#[derive(Default)]
struct CacheState {
    keys: Option<Arc<KeySet>>,
    /// The last fetch of any kind, and the last one made while usable keys
    /// were cached (a refresh).
    last_attempt: Option<Instant>,
    last_refresh: Option<Instant>,
    last_failed: bool,
    /// Counts completed fetch attempts, so a request that waited for the
    /// gate can tell whether someone fetched meanwhile.
    attempts: u64,
    /// From the discovery document, once read; reused for the process.
    jwks_uri: Option<FetchUrl>,
}

struct KeySet {
    by_kid: HashMap<String, Vec<VerifyingKey>>,
    fresh_until: Instant,
    usable_until: Instant,
}

struct VerifyingKey {
    algorithm: Algorithm,
    key: DecodingKey,
}

enum Lookup {
    Found(DecodingKey),
    OtherAlgorithm,
    Unknown,
    Unavailable,
}

impl KeySet {
    fn lookup(&self, kid: &str, algorithm: Algorithm) -> Lookup {
        match self.by_kid.get(kid) {
            None => Lookup::Unknown,
            Some(keys) => keys
                .iter()
                .find(|key| key.algorithm == algorithm)
                .map_or(Lookup::OtherAlgorithm, |key| Lookup::Found(key.key.clone())),
        }
    }
}

impl CacheState {
    fn usable_keys(&self, now: Instant) -> Option<&KeySet> {
        self.keys.as_deref().filter(|keys| now < keys.usable_until)
    }

    fn may_fetch(&self, now: Instant, policy: &JwksPolicy) -> bool {
        let (last, gap) = if self.usable_keys(now).is_some() {
            (self.last_refresh, policy.refresh_interval)
        } else {
            (self.last_attempt, policy.retry_interval)
        };
        last.is_none_or(|last| now.saturating_duration_since(last) >= gap)
    }

    /// The answer from what is cached, fresh or not. An unknown `kid` is
    /// only a verdict on the token if the last fetch succeeded: otherwise
    /// the key may exist and we just could not get it.
    fn lookup(&self, kid: &str, algorithm: Algorithm, now: Instant) -> Lookup {
        match self.usable_keys(now).map(|keys| keys.lookup(kid, algorithm)) {
            None => Lookup::Unavailable,
            Some(Lookup::Unknown) if self.last_failed => Lookup::Unavailable,
            Some(lookup) => lookup,
        }
    }
}

impl KeyCache {
    async fn key(&self, kid: &str, algorithm: Algorithm) -> Lookup {
        let seen = {
            let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            if let Some(keys) = state.keys.as_deref().filter(|keys| now < keys.fresh_until) {
                match keys.lookup(kid, algorithm) {
                    Lookup::Unknown => {}
                    found_or_mismatch => return found_or_mismatch,
                }
            }
            state.attempts
        };

        let _gate = self.gate.lock().await;
        let (fetch, jwks_uri) = {
            let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
            let fetch = state.attempts == seen && state.may_fetch(Instant::now(), &self.policy);
            (fetch, state.jwks_uri.clone())
        };
        if fetch {
            let outcome = self.fetch(jwks_uri).await;
            self.store(outcome);
        }
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        let lookup = state.lookup(kid, algorithm, Instant::now());
        if matches!(lookup, Lookup::Unavailable) && !fetch {
            tracing::debug!("no usable key for a JWT, and the last fetch of the issuer's keys failed");
        }
        lookup
    }

    fn store(&self, outcome: Result<Fetched, FetchError>) {
        let now = Instant::now();
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        state.attempts += 1;
        state.last_attempt = Some(now);
        if state.usable_keys(now).is_some() {
            state.last_refresh = Some(now);
        }
        match outcome {
            Ok(fetched) => {
                let ttl = self.policy.ttl(fetched.max_age);
                tracing::debug!(
                    keys = fetched.keys.len(),
                    ttl_s = ttl.as_secs(),
                    "fetched the issuer's keys"
                );
                state.keys = Some(Arc::new(KeySet {
                    by_kid: fetched.keys,
                    fresh_until: now + ttl,
                    usable_until: now + ttl + self.policy.max_stale,
                }));
                state.last_failed = false;
                state.jwks_uri = fetched.jwks_uri.or(state.jwks_uri.take());
            }
            Err(err) => {
                state.last_failed = true;
                if state.usable_keys(now).is_some() {
                    tracing::warn!(cause = %err, "could not refresh the issuer's keys; using the cached ones");
                } else {
                    tracing::error!(cause = %err, "could not fetch the issuer's keys; answering 503");
                }
            }
        }
    }

    async fn fetch(&self, known_jwks_uri: Option<FetchUrl>) -> Result<Fetched, FetchError> {
        let (jwks_uri, discovered) = match (&self.source, known_jwks_uri) {
            (JwksSource::Url(url), _) => (url.clone(), None),
            (JwksSource::Discovery { .. }, Some(url)) => (url, None),
            (JwksSource::Discovery { document, issuer }, None) => {
                let (discovery, _) = self.get_json::<DiscoveryDocument>(document).await?;
                if discovery.issuer != *issuer {
                    return Err(FetchError::DiscoveryIssuer);
                }
                let url = FetchUrl::parse(&discovery.jwks_uri).ok_or(FetchError::DiscoveryJwksUri)?;
                (url.clone(), Some(url))
            }
        };
        let (jwks, max_age) = self.get_json::<JwksDocument>(&jwks_uri).await?;
        Ok(Fetched {
            keys: jwks.usable_keys(),
            max_age,
            jwks_uri: discovered,
        })
    }

    /// One GET with the policy's timeout and size cap; the document and the
    /// response's `max-age`.
    async fn get_json<T: DeserializeOwned>(
        &self,
        url: &FetchUrl,
    ) -> Result<(T, Option<Duration>), FetchError> {
        let exchange = async {
            let request = Request::get(url.0.clone())
                .header(ACCEPT, "application/json")
                .header(USER_AGENT, USER_AGENT_VALUE)
                .body(Empty::<Bytes>::new())
                .map_err(|_| FetchError::Request)?;
            let response = self
                .client
                .request(request)
                .await
                .map_err(FetchError::Transport)?;
            if response.status() != StatusCode::OK {
                return Err(FetchError::Status(response.status()));
            }
            let max_age = max_age(response.headers());
            let declared = response
                .headers()
                .get(CONTENT_LENGTH)
                .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
            if declared.is_some_and(|length| length > self.policy.max_bytes as u64) {
                return Err(FetchError::TooLarge);
            }
            let body = Limited::new(response.into_body(), self.policy.max_bytes)
                .collect()
                .await
                .map_err(|err| {
                    if err.is::<http_body_util::LengthLimitError>() {
                        FetchError::TooLarge
                    } else {
                        FetchError::Body(err)
                    }
                })?
                .to_bytes();
            let document = serde_json::from_slice(&body).map_err(FetchError::Json)?;
            Ok((document, max_age))
        };
        match tokio::time::timeout(self.policy.timeout, exchange).await {
            Ok(outcome) => outcome.map_err(|err| err.at(url)),
            Err(_) => Err(FetchError::Timeout.at(url)),
        }
    }
}

struct Fetched {
    keys: HashMap<String, Vec<VerifyingKey>>,
    max_age: Option<Duration>,
    jwks_uri: Option<FetchUrl>,
}

/// `max-age` from `Cache-Control`; `no-cache` and `no-store` count as 0.
fn max_age(headers: &HeaderMap) -> Option<Duration> {
    let mut max_age = None;
    for directive in headers
        .get_all(CACHE_CONTROL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
    {
        let (name, value) = directive.split_once('=').unwrap_or((directive, ""));
        let name = name.trim();
        if name.eq_ignore_ascii_case("no-cache") || name.eq_ignore_ascii_case("no-store") {
            return Some(Duration::ZERO);
        }
        if name.eq_ignore_ascii_case("max-age") {
            max_age = value
                .trim()
                .trim_matches('"')
                .parse()
                .ok()
                .map(Duration::from_secs);
        }
    }
    max_age
}

#[derive(Deserialize)]
struct DiscoveryDocument {
    issuer: String,
    jwks_uri: String,
}

/// A JWKS. Each key is read on its own, so that one key of a type we do
/// not use (or do not understand) does not spoil the others.
#[derive(Deserialize)]
struct JwksDocument {
    keys: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct Jwk {
    kty: String,
    kid: Option<String>,
    #[serde(rename = "use")]
    usage: Option<String>,
    key_ops: Option<Vec<String>>,
    alg: Option<String>,
    n: Option<String>,
    e: Option<String>,
    crv: Option<String>,
    x: Option<String>,
    y: Option<String>,
}

impl JwksDocument {
    fn usable_keys(self) -> HashMap<String, Vec<VerifyingKey>> {
        let mut by_kid: HashMap<String, Vec<VerifyingKey>> = HashMap::new();
        for value in self.keys {
            match serde_json::from_value::<Jwk>(value)
                .map_err(|_| "malformed")
                .and_then(Jwk::usable)
            {
                Ok((kid, key)) => by_kid.entry(kid).or_default().push(key),
                Err(reason) => tracing::debug!(reason, "JWKS key skipped"),
            }
        }
        by_kid
    }
}

impl Jwk {
    fn usable(self) -> Result<(String, VerifyingKey), &'static str> {
        let kid = self.kid.ok_or("no kid")?;
        if self.usage.as_deref().is_some_and(|usage| usage != "sig") {
            return Err("not a signature key (use)");
        }
        if self
            .key_ops
            .is_some_and(|ops| !ops.iter().any(|op| op == "verify"))
        {
            return Err("not a verification key (key_ops)");
        }
        let (algorithm, key) = match (self.kty.as_str(), self.crv.as_deref()) {
            ("RSA", _) => {
                let (Some(n), Some(e)) = (&self.n, &self.e) else {
                    return Err("RSA key without n or e");
                };
                let key = DecodingKey::from_rsa_components(n, e).map_err(|_| "RSA key not base64url")?;
                if let DecodingKeyKind::RsaModulusExponent { n, .. } = key.kind() {
                    let significant = n.iter().skip_while(|&&byte| byte == 0).count();
                    if significant < 2048 / 8 {
                        return Err("RSA key shorter than 2048 bits");
                    }
                }
                (Algorithm::RS256, key)
            }
            ("EC", Some("P-256")) => {
                let (Some(x), Some(y)) = (&self.x, &self.y) else {
                    return Err("EC key without x or y");
                };
                let key = DecodingKey::from_ec_components(x, y).map_err(|_| "EC key not base64url")?;
                if key.try_get_as_bytes().map_or(true, |point| point.len() != 65) {
                    return Err("EC key is not a P-256 point");
                }
                (Algorithm::ES256, key)
            }
            ("EC", _) => return Err("EC key on a curve other than P-256"),
            ("oct", _) => return Err("symmetric key (oct): never used"),
            _ => return Err("unsupported key type"),
        };
        if self
            .alg
            .as_deref()
            .is_some_and(|alg| alg != algorithm_name(algorithm))
        {
            return Err("the key's alg is not one we accept");
        }
        Ok((kid, VerifyingKey { algorithm, key }))
    }
}

fn algorithm_name(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::RS256 => "RS256",
        Algorithm::ES256 => "ES256",
        _ => "",
    }
}

/// Why the keys could not be had.
#[derive(Debug)]
enum FetchError {
    Request,
    Transport(hyper_util::client::legacy::Error),
    Status(StatusCode),
    TooLarge,
    Body(Box<dyn std::error::Error + Send + Sync>),
    Json(serde_json::Error),
    Timeout,
    DiscoveryIssuer,
    DiscoveryJwksUri,
    At(String, Box<FetchError>),
}

impl FetchError {
    fn at(self, url: &FetchUrl) -> Self {
        Self::At(url.to_string(), Box::new(self))
    }
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Request => f.write_str("cannot build the request"),
            Self::Transport(err) => write!(f, "{}", Chain(err)),
            Self::Status(status) => write!(f, "status {status}"),
            Self::TooLarge => f.write_str("response larger than the size cap"),
            Self::Body(err) => write!(f, "reading the body: {err}"),
            Self::Json(err) => write!(f, "not the expected JSON: {err}"),
            Self::Timeout => f.write_str("timed out"),
            Self::DiscoveryIssuer => {
                f.write_str("the discovery document names another issuer than PLANTS_JWT_ISSUER")
            }
            Self::DiscoveryJwksUri => {
                f.write_str("the discovery document's jwks_uri is not an https URL (or http on loopback)")
            }
            Self::At(url, err) => write!(f, "GET {url}: {err}"),
        }
    }
}

impl std::error::Error for FetchError {}

type HttpClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// hyper with rustls on aws-lc-rs and the platform's CA certificates, as
/// the AWS SDK does it. Plain http is allowed by the connector because
/// `FetchUrl` only lets it through for loopback hosts.
fn http_client(timeout: Duration) -> Result<HttpClient, ClientError> {
    let native = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(native.certs);
    if added == 0 {
        tracing::warn!("no CA certificates found: https fetches of the issuer's keys will fail");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(ClientError)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(timeout));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(https))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::rsa::KeySize;
    use aws_lc_rs::signature::{
        ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, RSA_PKCS1_SHA256, RsaKeyPair,
        RsaPublicKeyComponents,
    };
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use lambda_http::http::HeaderValue;
    use serde_json::{Value, json};

    fn b64(bytes: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(bytes)
    }

    fn rsa_jwk(key: &RsaKeyPair, kid: &str) -> Value {
        let public = RsaPublicKeyComponents::<Vec<u8>>::from(key.public_key());
        json!({ "kty": "RSA", "kid": kid, "use": "sig", "n": b64(&public.n), "e": b64(&public.e) })
    }

    fn ec_jwk(key: &EcdsaKeyPair, kid: &str) -> Value {
        let point = key.public_key().as_ref();
        json!({ "kty": "EC", "kid": kid, "crv": "P-256", "x": b64(&point[1..33]), "y": b64(&point[33..]) })
    }

    fn signing_input(alg: &str, kid: &str) -> String {
        let header = json!({ "alg": alg, "typ": "JWT", "kid": kid });
        let claims = json!({ "iss": "https://issuer.example", "exp": unix_now() as u64 + 300 });
        format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        )
    }

    fn keys(jwks: Value) -> HashMap<String, Vec<VerifyingKey>> {
        serde_json::from_value::<JwksDocument>(jwks)
            .unwrap()
            .usable_keys()
    }

    fn only_key(jwks: &HashMap<String, Vec<VerifyingKey>>, kid: &str) -> DecodingKey {
        match &jwks[kid][..] {
            [key] => key.key.clone(),
            other => panic!("{} keys for {kid}", other.len()),
        }
    }

    /// If the crate's features ever select no backend, or two, this fails
    /// here instead of panicking at the first request.
    #[test]
    fn the_configured_crypto_backend_verifies_real_rs256_and_es256_signatures() {
        let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
        let rng = SystemRandom::new();
        let rsa = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let ec = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let jwks = keys(json!({ "keys": [rsa_jwk(&rsa, "r"), ec_jwk(&ec, "e")] }));

        let input = signing_input("RS256", "r");
        let mut signature = vec![0; rsa.public_modulus_len()];
        rsa.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut signature)
            .unwrap();
        let rs256 = format!("{input}.{}", b64(&signature));

        let input = signing_input("ES256", "e");
        let signature = ec.sign(&rng, input.as_bytes()).unwrap();
        let es256 = format!("{input}.{}", b64(signature.as_ref()));

        for (token, kid, algorithm) in [(&rs256, "r", Algorithm::RS256), (&es256, "e", Algorithm::ES256)] {
            let key = only_key(&jwks, kid);
            let validation = Validation::new(algorithm);
            let decoded = jsonwebtoken::decode::<Value>(token, &key, &validation);
            assert!(decoded.is_ok(), "{algorithm:?}: {decoded:?}");
            let (input, signature) = token.rsplit_once('.').unwrap();
            let mut signature = URL_SAFE_NO_PAD.decode(signature).unwrap();
            signature[10] ^= 1;
            let tampered = format!("{input}.{}", b64(&signature));
            let tampered = jsonwebtoken::decode::<Value>(&tampered, &key, &validation);
            assert!(tampered.is_err(), "{algorithm:?} with a changed signature");
        }
    }

    #[test]
    fn jwks_keys_we_must_not_use_are_skipped_and_the_rest_kept() {
        let rsa = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let weak = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let ec = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let with = |mut jwk: Value, field: &str, value: Value| {
            jwk[field] = value;
            jwk
        };
        let mut short = rsa_jwk(&weak, "short");
        // 1024 bits: the first half of a 2048-bit modulus.
        let public = RsaPublicKeyComponents::<Vec<u8>>::from(weak.public_key());
        short["n"] = json!(b64(&public.n[..128]));
        let jwks = keys(json!({ "keys": [
            rsa_jwk(&rsa, "rsa"),
            with(rsa_jwk(&rsa, "rsa-alg"), "alg", json!("RS256")),
            ec_jwk(&ec, "ec"),
            with(ec_jwk(&ec, "ec-alg"), "alg", json!("ES256")),
            { "kty": "oct", "kid": "oct", "k": "c2VjcmV0", "alg": "HS256" },
            { "kty": "oct", "kid": "oct-without-alg", "k": "c2VjcmV0" },
            with(rsa_jwk(&rsa, "enc"), "use", json!("enc")),
            with(rsa_jwk(&rsa, "ops"), "key_ops", json!(["encrypt"])),
            with(rsa_jwk(&rsa, "rs512"), "alg", json!("RS512")),
            with(rsa_jwk(&rsa, "ps256"), "alg", json!("PS256")),
            with(ec_jwk(&ec, "ec-rs256"), "alg", json!("RS256")),
            with(ec_jwk(&ec, "p384"), "crv", json!("P-384")),
            with(ec_jwk(&ec, "short-x"), "x", json!("AAAA")),
            with(rsa_jwk(&rsa, "no-e"), "e", Value::Null),
            with(rsa_jwk(&rsa, "bad-n"), "n", json!("not base64url!")),
            { "kty": "OKP", "kid": "okp", "crv": "Ed25519", "x": "AAAA" },
            { "kid": "no-kty" },
            "not an object",
            short,
            with(rsa_jwk(&rsa, "no-kid"), "kid", Value::Null),
        ]}));

        let mut kept: Vec<(&str, Algorithm)> = jwks
            .iter()
            .flat_map(|(kid, keys)| keys.iter().map(move |key| (kid.as_str(), key.algorithm)))
            .collect();
        kept.sort_by_key(|(kid, _)| *kid);
        assert_eq!(
            kept,
            [
                ("ec", Algorithm::ES256),
                ("ec-alg", Algorithm::ES256),
                ("rsa", Algorithm::RS256),
                ("rsa-alg", Algorithm::RS256),
            ]
        );
    }

    #[test]
    fn a_kid_is_looked_up_together_with_the_algorithm() {
        let rsa = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let now = Instant::now();
        let set = KeySet {
            by_kid: keys(json!({ "keys": [rsa_jwk(&rsa, "k")] })),
            fresh_until: now,
            usable_until: now,
        };
        assert!(matches!(set.lookup("k", Algorithm::RS256), Lookup::Found(_)));
        assert!(matches!(
            set.lookup("k", Algorithm::ES256),
            Lookup::OtherAlgorithm
        ));
        assert!(matches!(set.lookup("other", Algorithm::RS256), Lookup::Unknown));
    }

    #[test]
    fn cache_control_gives_max_age_and_no_cache_counts_as_zero() {
        let cases = [
            (vec!["max-age=300"], Some(300)),
            (vec!["public, max-age=60, must-revalidate"], Some(60)),
            (vec!["public", "Max-Age=\"90\""], Some(90)),
            (vec!["no-cache"], Some(0)),
            (vec!["max-age=600, no-store"], Some(0)),
            (vec!["max-age=soon"], None),
            (vec!["max-age=-1"], None),
            (vec!["public"], None),
            (vec![], None),
        ];
        for (values, expected) in cases {
            let mut headers = HeaderMap::new();
            for value in &values {
                headers.append(CACHE_CONTROL, HeaderValue::from_str(value).unwrap());
            }
            assert_eq!(max_age(&headers), expected.map(Duration::from_secs), "{values:?}");
        }
    }

    #[test]
    fn max_age_is_honoured_within_bounds() {
        let policy = JwksPolicy::default();
        let minutes = |m: u64| Duration::from_secs(m * 60);
        assert_eq!(policy.ttl(None), minutes(10));
        assert_eq!(policy.ttl(Some(minutes(30))), minutes(30));
        assert_eq!(policy.ttl(Some(Duration::ZERO)), minutes(1));
        assert_eq!(policy.ttl(Some(Duration::from_secs(86_400 * 365))), minutes(60));
    }

    #[test]
    fn the_default_policy_is_the_documented_one() {
        let policy = JwksPolicy::default();
        assert_eq!(policy.refresh_interval, Duration::from_secs(10));
        assert_eq!(policy.retry_interval, Duration::from_secs(1));
        assert_eq!(policy.timeout, Duration::from_millis(1500));
        assert_eq!(policy.max_bytes, 65_536);
        assert_eq!(policy.max_stale, Duration::from_secs(3600));
        const { assert!(LEEWAY_SECONDS <= 60) };
    }

    #[test]
    fn only_https_urls_or_plain_http_on_loopback_may_be_fetched() {
        for good in [
            "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Example/.well-known/jwks.json",
            "https://tenant.eu.auth0.com/",
            "http://127.0.0.1:8080/jwks.json",
            "http://127.1.2.3/jwks.json",
            "http://localhost:9000/realms/dev",
            "http://[::1]:8080/jwks",
        ] {
            assert!(FetchUrl::parse(good).is_some(), "{good}");
        }
        for bad in [
            "http://issuer.example/jwks.json",
            "http://10.0.0.1/jwks.json",
            "http://localhost.attacker.example/",
            "https://user:pass@issuer.example/",
            "ftp://issuer.example/",
            "/jwks.json",
            "issuer.example",
            "https://",
            "",
        ] {
            assert!(FetchUrl::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn access_tokens_are_typed_at_jwt_or_jwt_in_any_case() {
        for typ in [
            "at+jwt",
            "AT+JWT",
            "application/at+jwt",
            "JWT",
            "jwt",
            "Application/JWT",
        ] {
            assert!(is_access_token_type(typ), "{typ}");
        }
        for typ in [
            "",
            "id_token",
            "JOSE",
            "dpop+jwt",
            "application/",
            "logout+jwt",
            "at+jwt ",
        ] {
            assert!(!is_access_token_type(typ), "{typ}");
        }
    }

    #[test]
    fn scopes_are_single_rfc_6749_scope_tokens() {
        for scope in ["plants:write", "https://api.example/plants.write", "a", "!#[]~"] {
            assert!(is_scope_token(scope), "{scope}");
        }
        for scope in ["", "a b", "a\"b", "a\\b", "é", "a\tb", "a\u{7f}"] {
            assert!(!is_scope_token(scope), "{scope:?}");
        }
    }
}
