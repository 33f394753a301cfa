//! The issuer's keys, cached for the process: when they are fetched (at
//! start, behind a request, or while a request waits), how long they stay
//! fresh and usable, and the lookup of a `kid`. docs/configuration.md
//! ("JWTs from Amazon Cognito") gives the policy as an operator sees it.
//!
//! A request never waits for the issuer while usable keys are cached: one
//! that finds them ageing starts a refresh behind itself, and only a request
//! with no usable key, or with a `kid` the cache lacks, waits. Refreshes
//! follow requests, never a timer. Every fetch runs in a task of its own,
//! one at a time, and stores its own result, so a waiting request dropped at
//! its deadline loses nothing.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use jsonwebtoken::Algorithm;
use lambda_http::tracing::{self, Instrument};
use tokio::sync::watch;

use super::fetch::{FetchError, FetchUrl, Fetched, JwksFetcher};
use super::jwks::{PublicKey, VerifyingKey};

/// How soon a failed fetch of the keys is tried again: the second the 503's
/// `Retry-After` announces (`error::RETRY_AFTER_SECONDS`, which a test there
/// holds equal), so that a client that waits as told finds a fresh attempt.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// Keys are refreshed behind requests from the last `1 / REFRESH_AHEAD` of
/// their freshness on. A share rather than a fixed lead, so that keys kept
/// for a minute are not refreshed on every request and keys kept for an
/// hour are refreshed well before they go stale: with the default ten
/// minutes, from 7.5 minutes on.
const REFRESH_AHEAD: u32 = 4;

/// How the key cache talks to the issuer. `Default` is the production
/// policy; tests shorten the intervals rather than sleep through them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwksPolicy {
    /// While usable keys are cached, at most one refresh per interval,
    /// whatever triggers it (an unknown `kid`, keys near or past the end
    /// of their freshness). The first load is not a refresh: a `kid` first
    /// seen just after it may refresh at once.
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
    /// How long past their freshness keys are still used, while a refresh
    /// is under way or failing. After that a request waits for a fetch,
    /// and the function answers 503 until one succeeds.
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

/// The issuer's discovery document contradicts the configuration (it names
/// another issuer, or a `jwks_uri` that is not https): found during init,
/// the function refuses to start with this line, since no retry heals it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misconfigured(String);

impl std::fmt::Display for Misconfigured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Misconfigured {}

/// The issuer's keys, shared by every request of this process.
///
/// A request reads the keys under a short read lock. Anything that needs
/// the issuer goes through `start_fetch`, which runs the fetch in a task of
/// its own, one at a time: concurrent requests share it, and whoever looks
/// after a fetch has completed uses its result instead of fetching again.
/// Fetches are rate-limited by `JwksPolicy`.
pub(super) struct KeyCache {
    shared: Arc<Shared>,
}

struct Shared {
    policy: JwksPolicy,
    fetcher: JwksFetcher,
    state: RwLock<CacheState>,
    /// The count of completed fetches (`CacheState::attempts`), sent after
    /// each: what requests waiting for a fetch wait on.
    completed: watch::Sender<u64>,
    /// How fetches are spawned, when `main` says: `tokio::spawn` otherwise.
    spawn: OnceLock<Spawn>,
}

/// Spawns a task: what `main` hands the key cache so that its fetches run
/// as its host runs work behind an answer (on classic Lambda, ended before
/// the environment is frozen).
pub type Spawn = fn(Pin<Box<dyn Future<Output = ()> + Send>>);

#[derive(Default)]
struct CacheState {
    keys: Option<Arc<KeySet>>,
    /// The last fetch of any kind, and the last one made while usable keys
    /// were cached (a refresh).
    last_attempt: Option<Instant>,
    last_refresh: Option<Instant>,
    last_failed: bool,
    /// Counts completed fetch attempts, so a request that looks again can
    /// tell whether someone fetched meanwhile.
    attempts: u64,
    /// A fetch is under way, in its own task; it clears this when it stores
    /// its result (or is dropped), in the same write as `attempts`.
    fetching: bool,
    /// From the discovery document, once read; reused for the process.
    jwks_uri: Option<FetchUrl>,
    /// The last fetch found the discovery document contradicting the
    /// configuration.
    misconfigured: Option<Misconfigured>,
}

/// Keys as fetched: fresh for their TTL, refreshed behind requests from
/// `refresh_from` (the last quarter of the TTL) on, used until
/// `usable_until` (`max_stale` past the TTL).
struct KeySet {
    by_kid: HashMap<String, Vec<VerifyingKey>>,
    refresh_from: Instant,
    usable_until: Instant,
}

pub(super) enum Lookup {
    Found(Arc<PublicKey>),
    OtherAlgorithm,
    Unknown,
    Unavailable,
}

/// Who a fetch is for: it only changes what is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// During init, before any request.
    Init,
    /// A request waits for it.
    Request,
    /// Behind a request that was answered from the cached keys.
    Refresh,
}

impl KeySet {
    fn new(
        by_kid: HashMap<String, Vec<VerifyingKey>>,
        now: Instant,
        ttl: Duration,
        max_stale: Duration,
    ) -> Self {
        Self {
            by_kid,
            refresh_from: now + (ttl - ttl / REFRESH_AHEAD),
            usable_until: now + ttl + max_stale,
        }
    }

    fn lookup(&self, kid: &str, algorithm: Algorithm) -> Lookup {
        match self.by_kid.get(kid) {
            None => Lookup::Unknown,
            Some(keys) => keys
                .iter()
                .find(|key| key.algorithm == algorithm)
                .map_or(Lookup::OtherAlgorithm, |key| Lookup::Found(Arc::clone(&key.key))),
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

    /// Whether a request answered from the cached keys should start a
    /// refresh behind it: they are near or past the end of their freshness,
    /// no fetch is under way, and the rate limit allows one.
    fn refresh_due(&self, now: Instant, policy: &JwksPolicy) -> bool {
        !self.fetching
            && self.keys.as_deref().is_some_and(|keys| now >= keys.refresh_from)
            && self.may_fetch(now, policy)
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

    /// Takes a fetch's result. Logged here, so that every fetch is logged
    /// the same way whoever waited for it.
    fn store(&mut self, policy: &JwksPolicy, outcome: Result<Fetched, FetchError>, purpose: Purpose) {
        let now = Instant::now();
        self.attempts += 1;
        self.last_attempt = Some(now);
        if self.usable_keys(now).is_some() {
            self.last_refresh = Some(now);
        }
        match outcome {
            Ok(fetched) => {
                let ttl = policy.ttl(fetched.max_age);
                tracing::debug!(
                    keys = fetched.keys.len(),
                    ttl_s = ttl.as_secs(),
                    during = ?purpose,
                    "fetched the issuer's keys"
                );
                self.keys = Some(Arc::new(KeySet::new(fetched.keys, now, ttl, policy.max_stale)));
                self.last_failed = false;
                self.misconfigured = None;
                self.jwks_uri = fetched.jwks_uri.or(self.jwks_uri.take());
            }
            Err(err) => {
                self.last_failed = true;
                self.misconfigured = err.is_misconfiguration().then(|| Misconfigured(err.to_string()));
                match (purpose, &self.misconfigured) {
                    // `prepare` returns it, and the function refuses to start
                    // with it: one line, not two.
                    (Purpose::Init, Some(_)) => {}
                    (Purpose::Init, None) => tracing::warn!(
                        cause = %err,
                        "could not fetch the issuer's keys during init; starting anyway, requests will fetch them"
                    ),
                    _ if self.usable_keys(now).is_some() => tracing::warn!(
                        cause = %err,
                        "could not refresh the issuer's keys; using the cached ones"
                    ),
                    _ => tracing::error!(cause = %err, "could not fetch the issuer's keys; answering 503"),
                }
            }
        }
    }
}

impl KeyCache {
    pub(super) fn new(fetcher: JwksFetcher, policy: JwksPolicy) -> Self {
        let (completed, _) = watch::channel(0);
        Self {
            shared: Arc::new(Shared {
                fetcher,
                policy,
                state: RwLock::default(),
                completed,
                spawn: OnceLock::new(),
            }),
        }
    }

    /// Spawns fetches with `spawn` from now on; a second call changes nothing.
    pub(super) fn spawn_with(&self, spawn: Spawn) {
        let _ = self.shared.spawn.set(spawn);
    }

    /// Fetches the keys once, during init, so that the first requests find
    /// them cached. A failure is logged and the function starts anyway
    /// (requests then fetch, under the retry interval); only a discovery
    /// document that contradicts the configuration is an error. Takes at
    /// most the fetch's own timeouts (one exchange, or two with discovery).
    pub(super) async fn prepare(&self) -> Result<(), Misconfigured> {
        self.start_fetch(Purpose::Init);
        self.settled().await;
        let state = self.shared.read();
        match &state.misconfigured {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        }
    }

    /// The key for `kid`, from the cache when it has usable keys that know
    /// it (starting a refresh behind this request when they are due one),
    /// else after waiting for a fetch, if the rate limits allow one.
    pub(super) async fn key(&self, kid: &str, algorithm: Algorithm) -> Lookup {
        let seen = {
            let now = Instant::now();
            let state = self.shared.read();
            match state.usable_keys(now).map(|keys| keys.lookup(kid, algorithm)) {
                None | Some(Lookup::Unknown) => state.attempts,
                Some(found_or_mismatch) => {
                    if state.refresh_due(now, &self.shared.policy) {
                        drop(state);
                        self.refresh_behind();
                    }
                    return found_or_mismatch;
                }
            }
        };
        let fetched = self.wait_for_fetch(seen).await;
        let state = self.shared.read();
        let lookup = state.lookup(kid, algorithm, Instant::now());
        if matches!(lookup, Lookup::Unavailable) && !fetched {
            tracing::debug!("no usable key for a JWT, and the last fetch of the issuer's keys failed");
        }
        lookup
    }

    /// Resolves once no fetch is under way: at once, nearly always. For
    /// init, and for tests.
    pub(super) async fn settled(&self) {
        let mut completed = self.shared.completed.subscribe();
        let attempts = {
            let state = self.shared.read();
            if !state.fetching {
                return;
            }
            state.attempts
        };
        // The sender lives as long as `self`, so this cannot fail.
        let _ = completed.wait_for(|&done| done > attempts).await;
    }

    fn refresh_behind(&self) {
        let mut state = self.shared.write();
        // Again under the write lock: another request may have started one.
        if state.refresh_due(Instant::now(), &self.shared.policy) {
            tracing::debug!("refreshing the issuer's keys behind a request");
            self.start_fetch_locked(&mut state, Purpose::Refresh);
        }
    }

    /// Waits for the fetch under way, or starts one if the rate limits
    /// allow, unless a fetch has completed since this request looked (its
    /// `seen` count of attempts): then that one's result is what it gets.
    /// Returns whether it waited for a fetch.
    ///
    /// Cancellation-safe: dropped while it waits, it leaves the fetch
    /// running in its task, which stores the result and wakes the others.
    async fn wait_for_fetch(&self, seen: u64) -> bool {
        // Subscribed before looking, so that a fetch completing in between
        // is not missed: `wait_for` first checks the current count.
        let mut completed = self.shared.completed.subscribe();
        {
            let mut state = self.shared.write();
            let under_way = state.attempts == seen
                && (state.fetching
                    || state.may_fetch(Instant::now(), &self.shared.policy)
                        && self.start_fetch_locked(&mut state, Purpose::Request));
            if !under_way {
                return false;
            }
        }
        let _ = completed.wait_for(|&done| done > seen).await;
        true
    }

    fn start_fetch(&self, purpose: Purpose) -> bool {
        let mut state = self.shared.write();
        !state.fetching && self.start_fetch_locked(&mut state, purpose)
    }

    /// Spawns the fetch; returns whether it did. The task, not the request
    /// that started it, owns the fetch: it outlives that request.
    fn start_fetch_locked(&self, state: &mut CacheState, purpose: Purpose) -> bool {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!("cannot fetch the issuer's keys outside an async runtime");
            return false;
        };
        state.fetching = true;
        let fetch = InFlight {
            shared: Arc::clone(&self.shared),
            purpose,
            done: false,
        };
        // In the span of the request that started it: its trace shows the
        // fetch.
        let run = fetch.run(state.jwks_uri.clone()).in_current_span();
        match self.shared.spawn.get() {
            Some(spawn) => spawn(Box::pin(run)),
            None => drop(runtime.spawn(run)),
        }
        true
    }
}

/// One fetch in its task. If the task ends without storing a result (the
/// runtime shuts down, or the fetch panics), dropping it stores a failure,
/// so that `fetching` is never left set and no waiter waits forever.
struct InFlight {
    shared: Arc<Shared>,
    purpose: Purpose,
    done: bool,
}

impl InFlight {
    async fn run(mut self, jwks_uri: Option<FetchUrl>) {
        let outcome = self.shared.fetcher.fetch(jwks_uri).await;
        self.finish(outcome);
    }

    fn finish(&mut self, outcome: Result<Fetched, FetchError>) {
        self.done = true;
        let attempts = {
            let mut state = self.shared.write();
            state.fetching = false;
            state.store(&self.shared.policy, outcome, self.purpose);
            state.attempts
        };
        self.shared.completed.send_replace(attempts);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.done {
            self.finish(Err(FetchError::Abandoned));
        }
    }
}

impl Shared {
    fn read(&self) -> RwLockReadGuard<'_, CacheState> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, CacheState> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
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
        let set = KeySet::new(
            keys(json!({ "keys": [rsa_jwk(&rsa, "k")] })),
            now,
            Duration::ZERO,
            Duration::ZERO,
        );
        assert!(matches!(set.lookup("k", Algorithm::RS256), Lookup::Found(_)));
        assert!(matches!(
            set.lookup("k", Algorithm::ES256),
            Lookup::OtherAlgorithm
        ));
        assert!(matches!(set.lookup("other", Algorithm::RS256), Lookup::Unknown));
    }

    #[test]
    fn a_refresh_is_due_from_the_last_quarter_of_the_freshness_once_per_interval_one_at_a_time() {
        let policy = JwksPolicy::default();
        let minutes = |m: f64| Duration::from_secs_f64(m * 60.0);
        let fetched = Instant::now();
        let set = KeySet::new(HashMap::new(), fetched, minutes(10.0), policy.max_stale);
        assert_eq!(set.refresh_from, fetched + minutes(7.5));
        assert_eq!(set.usable_until, fetched + minutes(70.0));
        let mut state = CacheState {
            keys: Some(Arc::new(set)),
            last_attempt: Some(fetched),
            ..CacheState::default()
        };

        for (at, due) in [
            (0.0, false),
            (7.4, false),
            (7.5, true),
            (10.0, true),
            (69.9, true),
        ] {
            assert_eq!(
                state.refresh_due(fetched + minutes(at), &policy),
                due,
                "at {at} min"
            );
        }
        state.fetching = true;
        assert!(
            !state.refresh_due(fetched + minutes(8.0), &policy),
            "while one runs"
        );
        state.fetching = false;
        state.last_refresh = Some(fetched + minutes(8.0));
        let after_refresh = |seconds| fetched + minutes(8.0) + Duration::from_secs(seconds);
        assert!(
            !state.refresh_due(after_refresh(9), &policy),
            "9 s after a refresh"
        );
        assert!(
            state.refresh_due(after_refresh(10), &policy),
            "10 s after a refresh"
        );
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
