//! Static bearer tokens, configured as SHA-256 digests and compared in
//! constant time.

use std::fmt;

use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

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
    pub(super) fn from_plaintext(tokens: &[&str]) -> Self {
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

    /// Compares against every digest without stopping at a match, so the
    /// time taken does not tell which digest (or how much of it) matched.
    pub fn accepts(&self, token: &str) -> bool {
        let digest = Sha256::digest(token.as_bytes());
        let matched = self.digests.iter().fold(Choice::from(0), |matched, known| {
            matched | known.as_slice().ct_eq(digest.as_slice())
        });
        matched.into()
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
