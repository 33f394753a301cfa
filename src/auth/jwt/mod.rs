//! JWT access tokens from an OpenID Connect issuer: the signature against the
//! issuer's JWKS, then the claims, then the scope. The keys come from
//! `keys` (the cache), which `fetch` fills over HTTP; `jwks` decides which
//! of the issuer's keys may be used.
//!
//! Stricter than API Gateway's JWT authorizer on purpose: only RS256 and
//! ES256; no symmetric key from the JWKS is ever used; a key's own `alg`
//! must match the token's; ID tokens (`token_use: id`, a foreign `typ`) and
//! tokens with `crit` header parameters are refused; `iat` in the future is
//! refused; the `iss` claim must be one string, equal to the issuer.

mod fetch;
mod jwks;
mod keys;

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use aws_smithy_runtime_api::client::http::SharedHttpConnector;

pub use self::fetch::FetchUrl;
use self::fetch::{JwksFetcher, JwksSource};
pub use self::keys::{JwksPolicy, Misconfigured, RETRY_INTERVAL, Spawn};
use self::keys::{KeyCache, Lookup};

/// The scope a token needs when `PLANTS_JWT_SCOPE` is not set.
pub const DEFAULT_SCOPE: &str = "plants:write";

/// Clock skew allowed on `exp`, `nbf` and `iat`, in seconds. Half the 60 s
/// ceiling: enough for issuers with NTP, small enough that an expired
/// token is not worth replaying.
pub const LEEWAY_SECONDS: u64 = 30;

/// Larger tokens are refused before any parsing. Real access tokens are
/// 1 to 2 KiB; API Gateway caps all headers together at 10 KiB.
const MAX_TOKEN_BYTES: usize = 8 * 1024;

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

/// Verifies JWT access tokens. Built once at start-up; clones share the
/// key cache and the HTTP connector.
#[derive(Clone)]
pub struct JwtVerifier {
    inner: Arc<Inner>,
}

struct Inner {
    settings: JwtSettings,
    policy: JwksPolicy,
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
    /// A verifier that fetches the issuer's keys through the AWS SDK's
    /// default connector (the platform's roots, no proxy) until
    /// [`Self::with_http_connector`] hands it another.
    pub fn new(settings: JwtSettings) -> Self {
        Self::with_policy(settings, JwksPolicy::default())
    }

    pub fn with_policy(settings: JwtSettings, policy: JwksPolicy) -> Self {
        Self::build(settings, policy, None)
    }

    /// The same settings and policy, fetching through `connector`, with a
    /// key cache of its own, empty: hand it over before the first fetch.
    pub fn with_http_connector(self, connector: SharedHttpConnector) -> Self {
        let Inner { settings, policy, .. } = &*self.inner;
        Self::build(settings.clone(), policy.clone(), Some(connector))
    }

    fn build(settings: JwtSettings, policy: JwksPolicy, connector: Option<SharedHttpConnector>) -> Self {
        // Name the backend rather than rely on feature detection, which
        // panics at the first verification if a second backend is ever
        // enabled. An `Err` means a provider is installed already: ours,
        // by an earlier verifier.
        let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
        let source = match &settings.jwks_url {
            Some(url) => JwksSource::Url(url.clone()),
            None => JwksSource::Discovery {
                document: settings.discovery.clone(),
                issuer: settings.issuer.clone(),
            },
        };
        let fetcher = JwksFetcher::new(source, connector, policy.timeout, policy.max_bytes);
        Self {
            inner: Arc::new(Inner {
                rs256: settings.validation(Algorithm::RS256),
                es256: settings.validation(Algorithm::ES256),
                keys: KeyCache::new(fetcher, policy.clone()),
                settings,
                policy,
            }),
        }
    }

    pub fn scope(&self) -> &str {
        &self.inner.settings.scope
    }

    /// Fetches the issuer's keys, during init. An issuer out of reach is
    /// logged and not an error (requests fetch the keys then); a discovery
    /// document that contradicts the settings is.
    pub async fn prepare(&self) -> Result<(), Misconfigured> {
        self.inner.keys.prepare().await
    }

    /// Spawns the fetches of the issuer's keys with `spawn`.
    pub fn spawn_fetches_with(&self, spawn: Spawn) {
        self.inner.keys.spawn_with(spawn);
    }

    /// Resolves once no fetch of the issuer's keys is under way.
    pub async fn settled(&self) {
        self.inner.keys.settled().await;
    }

    pub(super) async fn check(&self, token: &str) -> Result<(), Failure> {
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

/// Why a token was not accepted. The reason is for the debug log only.
pub(super) enum Failure {
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

#[cfg(test)]
mod tests {
    use super::jwks::VerifyingKey;
    use super::jwks::tests::{b64, ec_jwk, keys, rsa_jwk};
    use super::*;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::rsa::KeySize;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, RSA_PKCS1_SHA256, RsaKeyPair};
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use jsonwebtoken::DecodingKey;
    use serde_json::{Value, json};
    use std::collections::HashMap;
    use std::time::Duration;

    fn signing_input(alg: &str, kid: &str) -> String {
        let header = json!({ "alg": alg, "typ": "JWT", "kid": kid });
        let claims = json!({ "iss": "https://issuer.example", "exp": unix_now() as u64 + 300 });
        format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        )
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
