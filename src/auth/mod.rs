//! Who may call: the `Authorization` header, and the verifiers that decide
//! whether a bearer token is accepted (static tokens, `jwt`).
//!
//! The `Authenticator` asks every configured verifier; adding one means
//! adding a field and one arm in `authenticate`, nothing else. `jwt` knows
//! nothing of this module: its `TokenVerifier` impl lives here, so imports
//! run one way. How an `Authenticator` is built is in `setup.rs`, which
//! imports this module and nothing imports it.

pub mod jwt;
mod setup;

use std::fmt;

use lambda_http::http::header::{AUTHORIZATION, HeaderMap};
use lambda_http::tracing;
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

use self::jwt::{Failure, JwtVerifier};

/// Why a request is not allowed through. Each variant is one `error` code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// No `Authorization` header, or a scheme other than Bearer.
    MissingCredentials,
    /// A bearer token that no verifier accepts. Deliberately carries no
    /// reason: the client learns nothing about why.
    InvalidToken,
    /// A valid token without the scope this operation needs.
    InsufficientScope { scope: String },
    /// The token could not be checked (e.g. the issuer's keys are out of
    /// reach), so it may well be fine: the client should retry.
    Unavailable,
}

/// Extracts the bearer token. The scheme is case-insensitive (RFC 7235
/// §2.1); the token must be RFC 6750 `b64token` syntax and is otherwise
/// passed on untouched.
pub fn bearer_token(headers: &HeaderMap) -> Result<&str, AuthError> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => return Err(AuthError::MissingCredentials),
        (Some(value), None) => value,
        // Two credentials at once is ambiguous; refuse rather than pick one.
        (Some(_), Some(_)) => return Err(AuthError::InvalidToken),
    };
    // The scheme as RFC 6750 spells it, which nearly every client sends,
    // is settled on the bytes: what follows is refused unless it is a
    // b64token, which is visible ASCII, so `to_str`'s check is not needed.
    if let Some(token) = value.as_bytes().strip_prefix(b"Bearer ") {
        return token_of(token);
    }
    let value = value.to_str().map_err(|_| AuthError::InvalidToken)?;
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::MissingCredentials);
    }
    token_of(token.as_bytes())
}

/// The token after a Bearer scheme and its space, which may be followed
/// by more spaces; it must be RFC 6750 `b64token` syntax and is otherwise
/// passed on untouched.
fn token_of(token: &[u8]) -> Result<&str, AuthError> {
    let start = token.iter().position(|&b| b != b' ').unwrap_or(token.len());
    let token = token.get(start..).unwrap_or_default();
    if token.is_empty() {
        return Err(AuthError::MissingCredentials);
    }
    if !is_b64token(token) {
        return Err(AuthError::InvalidToken);
    }
    // A b64token is ASCII.
    std::str::from_utf8(token).map_err(|_| AuthError::InvalidToken)
}

/// RFC 6750 §2.1: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
fn is_b64token(token: &[u8]) -> bool {
    let end = token.iter().rposition(|&b| b != b'=').map_or(0, |last| last + 1);
    let body = token.get(..end).unwrap_or_default();
    !body.is_empty() && body.iter().all(|&b| B64TOKEN.get(usize::from(b)) == Some(&true))
}

/// Which bytes a b64token is made of before its `=`s: one look-up a byte
/// rather than seven comparisons.
// Indexed only while compiling, within bounds: a slip fails the build.
#[allow(clippy::indexing_slicing)]
const B64TOKEN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < table.len() {
        table[b] = matches!(b as u8, b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'+' | b'/');
        b += 1;
    }
    table
};

/// What one verifier concludes about a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    Rejected,
    InsufficientScope { scope: String },
    Unavailable,
}

/// A way to verify bearer tokens.
pub trait TokenVerifier: Send + Sync {
    fn verify(&self, token: &str) -> impl Future<Output = Verdict> + Send;
}

/// Static tokens, configured as SHA-256 digests so that no plaintext token
/// sits in the function's configuration.
#[derive(Clone)]
pub struct StaticTokens {
    digests: Vec<[u8; 32]>,
}

impl fmt::Debug for StaticTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StaticTokens({} digests)", self.digests.len())
    }
}

/// A `PLANTS_TOKEN_SHA256` entry that is not 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidDigest {
    pub position: usize,
}

impl StaticTokens {
    /// Compares against every digest without stopping at a match, so the
    /// time taken does not tell which digest (or how much of it) matched.
    pub fn accepts(&self, token: &str) -> bool {
        let digest = Sha256::digest(token.as_bytes());
        let matched = self.digests.iter().fold(Choice::from(0), |matched, known| {
            matched | same_digest(known, digest.as_slice())
        });
        matched.into()
    }
}

/// Whether two digests are equal, in constant time: as four 64-bit words,
/// each compared through `subtle` and all four always, which costs a
/// quarter of a comparison byte by byte.
fn same_digest(known: &[u8; 32], digest: &[u8]) -> Choice {
    if digest.len() != known.len() {
        return Choice::from(0);
    }
    let word = |bytes: &[u8]| u64::from_le_bytes(<[u8; 8]>::try_from(bytes).unwrap_or_default());
    known
        .chunks_exact(8)
        .zip(digest.chunks_exact(8))
        .fold(Choice::from(1), |same, (known, digest)| {
            same & word(known).ct_eq(&word(digest))
        })
}

impl TokenVerifier for StaticTokens {
    async fn verify(&self, token: &str) -> Verdict {
        if self.accepts(token) {
            Verdict::Accepted
        } else {
            Verdict::Rejected
        }
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

/// Every configured way of verifying tokens; a token accepted by any is
/// accepted. Built only through `Config`, which refuses a configuration
/// with no verifier at all, so authentication cannot be switched off.
#[derive(Debug, Clone)]
pub struct Authenticator {
    static_tokens: Option<StaticTokens>,
    jwt: Option<JwtVerifier>,
}

impl Authenticator {
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<(), AuthError> {
        let token = bearer_token(headers)?;
        let static_verdict = match &self.static_tokens {
            Some(static_tokens) => Some(static_tokens.verify(token).await),
            None => None,
        };
        // A token one verifier accepts need not cost a JWT check (or a
        // debug line saying it is no JWT).
        if static_verdict == Some(Verdict::Accepted) {
            return Ok(());
        }
        let jwt_verdict = match &self.jwt {
            Some(jwt) => Some(jwt.verify(token).await),
            None => None,
        };
        combine(static_verdict.into_iter().chain(jwt_verdict))
    }
}

/// Acceptance by any verifier wins; then a scope problem (the token was
/// genuine); then "could not check" (worth a retry); else the token is bad.
fn combine(verdicts: impl IntoIterator<Item = Verdict>) -> Result<(), AuthError> {
    let mut outcome = Err(AuthError::InvalidToken);
    for verdict in verdicts {
        match verdict {
            Verdict::Accepted => return Ok(()),
            Verdict::InsufficientScope { scope } => outcome = Err(AuthError::InsufficientScope { scope }),
            Verdict::Unavailable if outcome == Err(AuthError::InvalidToken) => {
                outcome = Err(AuthError::Unavailable)
            }
            Verdict::Unavailable | Verdict::Rejected => {}
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::http::HeaderValue;

    fn headers(values: &[&[u8]]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append(AUTHORIZATION, HeaderValue::from_bytes(value).unwrap());
        }
        map
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_the_token_is_kept_exactly() {
        for value in [
            "Bearer Abc-1.2_3~4+5/6==",
            "bearer Abc-1.2_3~4+5/6==",
            "BEARER  Abc-1.2_3~4+5/6==",
        ] {
            assert_eq!(
                bearer_token(&headers(&[value.as_bytes()])),
                Ok("Abc-1.2_3~4+5/6=="),
                "{value}"
            );
        }
    }

    #[test]
    fn no_header_or_another_scheme_means_missing_credentials() {
        let cases: &[&[&[u8]]] = &[
            &[],
            &[b"Basic dXNlcjpwYXNz"],
            &[b"Bearer"],
            &[b"Bearer "],
            &[b"Bearerabc"],
            &[b"Bearer\tabc"],
            &[b"Token abc"],
            &[b""],
        ];
        for case in cases {
            assert_eq!(
                bearer_token(&headers(case)),
                Err(AuthError::MissingCredentials),
                "{case:?}"
            );
        }
    }

    #[test]
    fn malformed_bearer_tokens_are_invalid() {
        let cases: &[&[&[u8]]] = &[
            &[b"Bearer two words"],
            &[b"Bearer ===="],
            &[b"Bearer tok\"en"],
            &[b"Bearer tok,en"],
            &[b"Bearer \xfftoken"],
            &[b"Bearer a", b"Bearer b"],
        ];
        for case in cases {
            assert_eq!(
                bearer_token(&headers(case)),
                Err(AuthError::InvalidToken),
                "{case:?}"
            );
        }
    }

    /// `bearer_token` as it was written on the header's `to_str`.
    fn reference(headers: &HeaderMap) -> Result<&str, AuthError> {
        let mut values = headers.get_all(AUTHORIZATION).iter();
        let value = match (values.next(), values.next()) {
            (None, _) => return Err(AuthError::MissingCredentials),
            (Some(value), None) => value,
            (Some(_), Some(_)) => return Err(AuthError::InvalidToken),
        };
        let value = value.to_str().map_err(|_| AuthError::InvalidToken)?;
        let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::MissingCredentials);
        }
        let token = token.trim_start_matches(' ');
        if token.is_empty() {
            return Err(AuthError::MissingCredentials);
        }
        let body = token.trim_end_matches('=');
        let b64 = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/');
        if body.is_empty() || !body.bytes().all(b64) {
            return Err(AuthError::InvalidToken);
        }
        Ok(token)
    }

    #[test]
    fn every_byte_anywhere_in_a_credential_is_judged_as_on_the_headers_text() {
        let mut values: Vec<Vec<u8>> = Vec::new();
        for shape in [
            "Bearer ab=",
            "bearer  ab==",
            "Bearer   a",
            "BEARER ab",
            "Bearer ",
            "Bearer  ",
        ] {
            for at in 0..=shape.len() {
                for byte in 0..=u8::MAX {
                    let mut value = shape.as_bytes().to_vec();
                    value.insert(at, byte);
                    values.push(value);
                }
            }
        }
        let mut judged = 0;
        for value in values {
            // Only what a header can hold.
            let Ok(header) = HeaderValue::from_bytes(&value) else {
                continue;
            };
            let mut map = HeaderMap::new();
            map.append(AUTHORIZATION, header);
            assert_eq!(
                bearer_token(&map),
                reference(&map),
                "{:?}",
                String::from_utf8_lossy(&value)
            );
            judged += 1;
        }
        assert!(judged > 10_000, "{judged}");
    }

    #[test]
    fn a_digest_is_the_same_only_when_every_bit_is() {
        let known: [u8; 32] = std::array::from_fn(|at| u8::try_from(at * 7 + 1).unwrap());
        assert!(bool::from(same_digest(&known, &known)));
        for at in 0..32 {
            for bit in 0..8 {
                let mut other = known;
                other[at] ^= 1 << bit;
                assert!(!bool::from(same_digest(&known, &other)), "byte {at}, bit {bit}");
            }
        }
        assert!(!bool::from(same_digest(&known, &known[..31])));
        assert!(!bool::from(same_digest(&known, &[])));
    }

    #[tokio::test]
    async fn the_authenticator_accepts_configured_tokens_and_nothing_else() {
        let auth = Authenticator::with_static_tokens(&["alpha", "beta"]);
        assert_eq!(auth.authenticate(&headers(&[b"Bearer alpha"])).await, Ok(()));
        assert_eq!(auth.authenticate(&headers(&[b"bearer beta"])).await, Ok(()));
        assert_eq!(
            auth.authenticate(&headers(&[b"Bearer gamma"])).await,
            Err(AuthError::InvalidToken)
        );
        assert_eq!(
            auth.authenticate(&headers(&[])).await,
            Err(AuthError::MissingCredentials)
        );
    }

    #[test]
    fn verdicts_combine_with_acceptance_first_then_scope_then_unavailability() {
        let scope = || Verdict::InsufficientScope {
            scope: "plants:write".into(),
        };
        let insufficient = Err(AuthError::InsufficientScope {
            scope: "plants:write".into(),
        });
        let cases = [
            (vec![Verdict::Rejected, Verdict::Accepted], Ok(())),
            (vec![scope(), Verdict::Accepted], Ok(())),
            (vec![Verdict::Rejected, scope()], insufficient.clone()),
            (vec![Verdict::Unavailable, scope()], insufficient),
            (
                vec![Verdict::Rejected, Verdict::Unavailable],
                Err(AuthError::Unavailable),
            ),
            (vec![Verdict::Rejected], Err(AuthError::InvalidToken)),
            (vec![], Err(AuthError::InvalidToken)),
        ];
        for (verdicts, expected) in cases {
            assert_eq!(combine(verdicts.clone()), expected, "{verdicts:?}");
        }
    }
}
