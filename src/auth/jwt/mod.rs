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

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::Algorithm;
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny};

use aws_smithy_runtime_api::client::http::SharedHttpConnector;

pub use self::fetch::FetchUrl;
use self::fetch::{JwksFetcher, JwksSource};
use self::jwks::PublicKey;
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
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(Failure::Rejected("algorithm not allowed"));
        }
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
        let claims = verified_claims(token, &key).map_err(Failure::Rejected)?;
        self.check_registered(&claims)?;
        self.check_claims(&claims)
    }

    /// The registered claims in the order and with the leeway
    /// jsonwebtoken's `decode` checks them: `exp` required, `nbf`, `iss`.
    fn check_registered(&self, claims: &Claims) -> Result<(), Failure> {
        let now = unix_now_seconds();
        let Some(exp) = claims.exp.0.flatten() else {
            return Err(Failure::Rejected("no numeric exp"));
        };
        let Some(nbf) = claims.nbf.0 else {
            return Err(Failure::Rejected("a time claim is not a number"));
        };
        if exp < now.saturating_sub(LEEWAY_SECONDS) {
            return Err(Failure::Rejected("expired"));
        }
        if nbf.is_some_and(|nbf| nbf > now.saturating_add(LEEWAY_SECONDS)) {
            return Err(Failure::Rejected("not valid yet (nbf)"));
        }
        if claims.iss != self.inner.settings.issuer {
            return Err(Failure::Rejected("wrong issuer"));
        }
        Ok(())
    }

    /// What the registered claims leave to us.
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

/// The payload of a token whose signature `key` verifies, as
/// jsonwebtoken's `decode` reads it: the signature and then the payload
/// base64url without padding, the payload a JSON object of [`Claims`].
/// The token's header was read already (`decode_header`), so it has its
/// three parts.
fn verified_claims(token: &str, key: &PublicKey) -> Result<Claims, &'static str> {
    const MALFORMED: &str = "malformed token or claims";
    let (message, signature) = token.rsplit_once('.').ok_or(MALFORMED)?;
    let (_, payload) = message.rsplit_once('.').ok_or(MALFORMED)?;
    let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| MALFORMED)?;
    if !key.verifies(message.as_bytes(), &signature) {
        return Err("bad signature");
    }
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| MALFORMED)?;
    serde_json::from_slice(&payload).map_err(|_| MALFORMED)
}

/// The claims a token is checked on. Any of them with the wrong JSON type
/// (or twice) makes the token invalid, except `exp` and `nbf`, which are
/// refused later if they are not numbers, and `sub`, which is only held to
/// appearing once, as jsonwebtoken's `decode` holds them.
#[derive(Deserialize)]
struct Claims {
    #[serde(default, deserialize_with = "seconds")]
    exp: Seconds,
    #[serde(default, deserialize_with = "seconds")]
    nbf: Seconds,
    #[serde(rename = "sub")]
    _sub: Option<IgnoredAny>,
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

/// A NumericDate claim (`exp`, `nbf`) in whole seconds: `Some(None)` when
/// absent, `None` when it is not a number from 0 to `u64::MAX` (`null`
/// included; a fraction is rounded), as jsonwebtoken reads them.
struct Seconds(Option<Option<u64>>);

impl Default for Seconds {
    fn default() -> Self {
        Self(Some(None))
    }
}

fn seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Seconds, D::Error> {
    let number = match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::Number(number) => number,
        _ => return Ok(Seconds(None)),
    };
    Ok(Seconds(match (number.as_u64(), number.as_f64()) {
        (Some(whole), _) => Some(Some(whole)),
        // jsonwebtoken's bound: below 2^64, the float nearest `u64::MAX`.
        (None, Some(fraction)) if fraction.is_finite() && fraction >= 0.0 && fraction < u64::MAX as f64 => {
            Some(Some(fraction.round() as u64))
        }
        _ => None,
    }))
}

fn unix_now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
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
    use jsonwebtoken::{DecodingKey, Validation};
    use serde_json::json;
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

    fn only_key(jwks: &HashMap<String, Vec<VerifyingKey>>, kid: &str) -> Arc<PublicKey> {
        match &jwks[kid][..] {
            [key] => Arc::clone(&key.key),
            other => panic!("{} keys for {kid}", other.len()),
        }
    }

    #[test]
    fn the_issuers_parsed_keys_verify_real_rs256_and_es256_signatures() {
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
            let decoded = verified_claims(token, &key);
            assert!(decoded.is_ok(), "{algorithm:?}: {:?}", decoded.err());
            let (input, signature) = token.rsplit_once('.').unwrap();
            let mut signature = URL_SAFE_NO_PAD.decode(signature).unwrap();
            signature[10] ^= 1;
            let tampered = format!("{input}.{}", b64(&signature));
            assert_eq!(
                verified_claims(&tampered, &key).err(),
                Some("bad signature"),
                "{algorithm:?} with a changed signature"
            );
            let other = if kid == "r" { "e" } else { "r" };
            assert_eq!(
                verified_claims(token, &only_key(&jwks, other)).err(),
                Some("bad signature"),
                "{algorithm:?} with the other key"
            );
        }
    }

    /// The registered claims judged as jsonwebtoken's `decode` judges
    /// them: the same verdict and reason.
    #[test]
    fn registered_claims_are_judged_as_jsonwebtoken_judged_them() {
        let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
        let rng = SystemRandom::new();
        let rsa = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let jwk = rsa_jwk(&rsa, "r");
        let jwks = keys(json!({ "keys": [jwk.clone()] }));
        let key = only_key(&jwks, "r");
        let decoding =
            DecodingKey::from_rsa_components(jwk["n"].as_str().unwrap(), jwk["e"].as_str().unwrap()).unwrap();
        let issuer = "https://issuer.example";
        let verifier = JwtVerifier::new(JwtSettings::new(issuer, &["plants"], None, DEFAULT_SCOPE).unwrap());
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss"]);
        validation.set_issuer(&[issuer]);
        validation.validate_aud = false;
        let sign = |payload: &str| {
            let input = format!(
                "{}.{}",
                b64(json!({ "alg": "RS256", "kid": "r" }).to_string().as_bytes()),
                b64(payload.as_bytes())
            );
            let mut signature = vec![0; rsa.public_modulus_len()];
            rsa.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut signature)
                .unwrap();
            format!("{input}.{}", b64(&signature))
        };
        let now = unix_now() as u64;
        let rest = r#""iss":"https://issuer.example","aud":"plants","scope":"plants:write""#;
        let payloads = [
            format!(r#"{{{rest},"exp":{}}}"#, now + 300),
            format!(r#"{{{rest}}}"#),
            format!(r#"{{{rest},"exp":null}}"#),
            format!(r#"{{{rest},"exp":"{}"}}"#, now + 300),
            format!(r#"{{{rest},"exp":-1}}"#),
            format!(r#"{{{rest},"exp":{}.6}}"#, now + 300),
            format!(r#"{{{rest},"exp":{}}}"#, now - 31),
            format!(r#"{{{rest},"exp":{}}}"#, now - 29),
            format!(r#"{{{rest},"exp":1e30}}"#),
            format!(r#"{{{rest},"exp":18446744073709551615}}"#),
            format!(r#"{{{rest},"exp":{},"nbf":{}}}"#, now + 300, now + 31),
            format!(r#"{{{rest},"exp":{},"nbf":{}}}"#, now + 300, now + 29),
            format!(r#"{{{rest},"exp":{},"nbf":null}}"#, now + 300),
            format!(r#"{{{rest},"exp":{},"nbf":"0"}}"#, now + 300),
            format!(r#"{{{rest},"exp":{},"nbf":-5}}"#, now + 300),
            format!(r#"{{{rest},"exp":{},"nbf":0.4}}"#, now + 300),
            format!(r#"{{{rest},"exp":{},"exp":{}}}"#, now + 300, now + 300),
            format!(r#"{{{rest},"exp":{},"sub":"a","sub":"b"}}"#, now + 300),
            format!(r#"{{{rest},"exp":{},"sub":7}}"#, now + 300),
            format!(
                r#"{{"iss":"https://other.example","aud":"plants","exp":{}}}"#,
                now + 300
            ),
            format!(
                r#"{{"iss":["https://issuer.example"],"aud":"plants","exp":{}}}"#,
                now + 300
            ),
            format!(r#"{{"aud":"plants","exp":{}}}"#, now + 300),
            format!(r#"{{{rest},"exp":{},"iat":"x"}}"#, now + 300),
            "[1,2]".to_owned(),
            "not json".to_owned(),
        ];
        for payload in payloads {
            let token = sign(&payload);
            let before = match jsonwebtoken::decode::<Claims>(&token, &decoding, &validation) {
                Ok(data) => verifier
                    .check_claims(&data.claims)
                    .map_err(|failure| reason(&failure)),
                Err(err) => Err(describe(err.kind())),
            };
            let now = verified_claims(&token, &key)
                .map_err(Failure::Rejected)
                .and_then(|claims| {
                    verifier.check_registered(&claims)?;
                    verifier.check_claims(&claims)
                })
                .map_err(|failure| reason(&failure));
            assert_eq!(now, before, "{payload}");
        }
        let (input, _) = sign("{}")
            .rsplit_once('.')
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .unwrap();
        assert_eq!(
            verified_claims(&format!("{input}.not+base64"), &key).err(),
            Some("malformed token or claims")
        );
    }

    #[test]
    fn a_numeric_date_is_a_whole_number_of_seconds_or_a_fraction_rounded() {
        let read = |json: &str| {
            let claims: Claims = serde_json::from_str(&format!(r#"{{"iss":"i","exp":{json}}}"#)).unwrap();
            claims.exp.0
        };
        for (json, seconds) in [
            ("5", Some(Some(5))),
            ("5.4", Some(Some(5))),
            ("5.5", Some(Some(6))),
            ("-0.0", Some(Some(0))),
            ("18446744073709551615", Some(Some(u64::MAX))),
            ("1e19", Some(Some(10_000_000_000_000_000_000))),
            ("1e30", None),
            ("-1", None),
            ("-0.5", None),
            ("null", None),
            (r#""5""#, None),
            ("true", None),
        ] {
            assert_eq!(read(json), seconds, "{json}");
        }
        let absent: Claims = serde_json::from_str(r#"{"iss":"i"}"#).unwrap();
        assert_eq!((absent.exp.0, absent.nbf.0), (Some(None), Some(None)));
    }

    fn reason(failure: &Failure) -> &'static str {
        match failure {
            Failure::Rejected(reason) => reason,
            Failure::MissingScope => "missing scope",
            Failure::Unavailable => "unavailable",
        }
    }

    /// A reason for each of jsonwebtoken's errors.
    fn describe(kind: &jsonwebtoken::errors::ErrorKind) -> &'static str {
        use jsonwebtoken::errors::ErrorKind;
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
