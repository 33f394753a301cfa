//! How an `Authenticator` is built: once at start-up, from the
//! configuration, with the work of init (the issuer's keys), or in a test.
//! Nothing here runs per request.

use aws_smithy_runtime_api::client::http::SharedHttpConnector;
use sha2::{Digest, Sha256};

use super::jwt::{JwtVerifier, Misconfigured, Spawn};
use super::{Authenticator, InvalidDigest, StaticTokens};

impl StaticTokens {
    /// Parses comma-separated hex digests; blanks around commas are ignored.
    /// Returns `Ok(None)` when the list has no digest at all.
    pub fn from_hex_list(list: &str) -> Result<Option<Self>, InvalidDigest> {
        let digests = list
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .enumerate()
            .map(|(position, entry)| {
                let mut digest = [0u8; 32];
                hex::decode_to_slice(entry, &mut digest)
                    .map(|()| digest)
                    .map_err(|_| InvalidDigest {
                        position: position + 1,
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((!digests.is_empty()).then_some(Self { digests }))
    }

    /// The digests of these plaintext tokens, for tests and benchmarks.
    fn from_plaintext(tokens: &[&str]) -> Self {
        let digests = tokens
            .iter()
            .map(|token| Sha256::digest(token.as_bytes()).into())
            .collect();
        Self { digests }
    }

    /// The digest of a token, as `PLANTS_TOKEN_SHA256` wants it.
    pub fn digest_hex(token: &str) -> String {
        hex::encode(Sha256::digest(token.as_bytes()))
    }
}

impl Authenticator {
    pub(crate) fn new(static_tokens: Option<StaticTokens>, jwt: Option<JwtVerifier>) -> Option<Self> {
        (static_tokens.is_some() || jwt.is_some()).then_some(Self { static_tokens, jwt })
    }

    /// An authenticator that accepts the JWTs `verifier` accepts, for tests.
    pub fn with_jwt(verifier: JwtVerifier) -> Self {
        Self {
            static_tokens: None,
            jwt: Some(verifier),
        }
    }

    /// An authenticator that accepts exactly these plaintext tokens, for
    /// tests and benchmarks.
    pub fn with_static_tokens(tokens: &[&str]) -> Self {
        Self {
            static_tokens: Some(StaticTokens::from_plaintext(tokens)),
            jwt: None,
        }
    }

    /// The same authenticator, its JWT verifier (if any) fetching the
    /// issuer's keys through the connector `connector` makes: the function
    /// hands it the host's outbound connector, which honours
    /// `AWS_CA_BUNDLE` and the proxy variables. Called only with JWTs on,
    /// so static tokens alone never build one. Before `prepare` and the
    /// first request: the verifier's key cache starts empty.
    pub fn with_http_connector(self, connector: impl FnOnce() -> SharedHttpConnector) -> Self {
        Self {
            jwt: self.jwt.map(|jwt| jwt.with_http_connector(connector())),
            ..self
        }
    }

    /// Work for init: with JWTs on, the issuer's keys are fetched, so that
    /// no request waits for them. Takes at most the fetch's timeouts; an
    /// issuer out of reach is only logged. An error means the issuer's
    /// discovery document contradicts the configuration: refuse to start.
    pub async fn prepare(&self) -> Result<(), Misconfigured> {
        match &self.jwt {
            Some(jwt) => jwt.prepare().await,
            None => Ok(()),
        }
    }

    /// Spawns the fetches of the issuer's keys with `spawn` (the host's,
    /// which ends work behind an answer before the environment is frozen)
    /// rather than `tokio::spawn`.
    pub fn spawn_fetches_with(&self, spawn: Spawn) {
        if let Some(jwt) = &self.jwt {
            jwt.spawn_fetches_with(spawn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_digests_parse_from_a_comma_separated_list() {
        let digest = StaticTokens::digest_hex("secret");
        let list = format!(" {digest} ,{},", digest.to_uppercase());
        let tokens = StaticTokens::from_hex_list(&list).unwrap().unwrap();
        assert!(tokens.accepts("secret"));
        assert!(!tokens.accepts("Secret"));
        assert!(!tokens.accepts(""));
        assert_eq!(StaticTokens::from_hex_list(" , ").unwrap().map(|_| ()), None);
    }

    #[test]
    fn a_digest_that_is_not_64_hex_digits_is_reported_by_position() {
        let digest = StaticTokens::digest_hex("secret");
        let not_hex = format!("{}g", &digest[..63]);
        let too_long = format!("{digest}0");
        for bad in ["abc", "secret", &digest[..63], &too_long, &not_hex] {
            assert_eq!(
                StaticTokens::from_hex_list(&format!("{digest},{bad}")).map(|_| ()),
                Err(InvalidDigest { position: 2 }),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_digest_of_a_known_token_matches_sha256sum() {
        // printf %s plant-store-dev-token | sha256sum
        assert_eq!(
            StaticTokens::digest_hex("plant-store-dev-token"),
            "6f07e6f450d73a3176f329c6900a41f88a96f4b875cbea4e6f9e25f8ad1362f5"
        );
    }
}
