//! The issuer's keys, cached for the process: when they are fetched again,
//! how long they stay fresh and usable, and the lookup of a `kid`.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::{Algorithm, DecodingKey};
use lambda_http::tracing;

use super::fetch::{ClientError, FetchError, FetchUrl, Fetched, JwksFetcher, JwksSource};
use super::jwks::VerifyingKey;

/// How soon a failed fetch of the keys is tried again: the second the 503's
/// `Retry-After` announces (`error::RETRY_AFTER_SECONDS`, which a test there
/// holds equal), so that a client that waits as told finds a fresh attempt.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);

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
            retry_interval: RETRY_INTERVAL,
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

/// The issuer's keys, shared by every request of this process.
///
/// A request whose `kid` is cached and fresh reads the keys under a short
/// read lock and never waits. Anything else (nothing cached, an unknown
/// `kid`, keys past their freshness) goes through `gate`, so concurrent
/// requests share one fetch: whoever gets the gate after a fetch has
/// completed uses its result instead of fetching again. Fetches are
/// rate-limited by `JwksPolicy`.
pub(super) struct KeyCache {
    policy: JwksPolicy,
    fetcher: JwksFetcher,
    state: RwLock<CacheState>,
    gate: tokio::sync::Mutex<()>,
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

pub(super) enum Lookup {
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
    pub(super) fn new(source: JwksSource, policy: JwksPolicy) -> Result<Self, ClientError> {
        Ok(Self {
            fetcher: JwksFetcher::new(source, policy.timeout, policy.max_bytes)?,
            policy,
            state: RwLock::default(),
            gate: tokio::sync::Mutex::new(()),
        })
    }

    pub(super) async fn key(&self, kid: &str, algorithm: Algorithm) -> Lookup {
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
            let outcome = self.fetcher.fetch(jwks_uri).await;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::jwt::jwks::tests::{keys, rsa_jwk};
    use aws_lc_rs::rsa::KeySize;
    use aws_lc_rs::signature::RsaKeyPair;
    use serde_json::json;

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
    fn max_age_is_honoured_within_bounds() {
        let policy = JwksPolicy::default();
        let minutes = |m: u64| Duration::from_secs(m * 60);
        assert_eq!(policy.ttl(None), minutes(10));
        assert_eq!(policy.ttl(Some(minutes(30))), minutes(30));
        assert_eq!(policy.ttl(Some(Duration::ZERO)), minutes(1));
        assert_eq!(policy.ttl(Some(Duration::from_secs(86_400 * 365))), minutes(60));
    }
}
