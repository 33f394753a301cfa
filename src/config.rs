//! The function's configuration, read once at start-up. A problem here stops
//! the function before it serves anything, with one line naming the variable.

use std::fmt;

use crate::auth::{Authenticator, StaticTokens};

#[derive(Debug, Clone)]
pub struct Config {
    pub table_name: String,
    pub authenticator: Authenticator,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    MissingTableName,
    InvalidTokenDigest { position: usize },
    JwtNotAvailable,
    NoVerifier,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingTableName => f.write_str("TABLE_NAME is not set: set it to the name of the DynamoDB table that stores the plants"),
            Self::InvalidTokenDigest { position } => write!(
                f,
                "PLANTS_TOKEN_SHA256 entry {position} is not a SHA-256 hex digest (64 hex digits); make one with: printf %s \"$TOKEN\" | sha256sum"
            ),
            Self::JwtNotAvailable => f.write_str(
                "PLANTS_JWT_ISSUER is set, but this version cannot verify JWTs yet: unset it and set PLANTS_TOKEN_SHA256",
            ),
            Self::NoVerifier => f.write_str(
                "no way to verify bearer tokens: set PLANTS_TOKEN_SHA256 (comma-separated SHA-256 hex digests of the accepted tokens) or PLANTS_JWT_ISSUER",
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads configuration through `lookup`. An empty value counts as unset,
    /// because that is how SAM passes an optional parameter left blank.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());

        let table_name = get("TABLE_NAME").ok_or(ConfigError::MissingTableName)?;
        let static_tokens = match get("PLANTS_TOKEN_SHA256") {
            Some(list) => {
                StaticTokens::from_hex_list(&list).map_err(|err| ConfigError::InvalidTokenDigest {
                    position: err.position,
                })?
            }
            None => None,
        };
        if get("PLANTS_JWT_ISSUER").is_some() {
            return Err(ConfigError::JwtNotAvailable);
        }
        let authenticator = Authenticator::new(static_tokens).ok_or(ConfigError::NoVerifier)?;

        Ok(Self {
            table_name: table_name.trim().to_owned(),
            authenticator,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_lookup(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn a_table_and_a_token_digest_make_a_working_configuration() {
        let digest = StaticTokens::digest_hex("dev");
        let config = config(&[("TABLE_NAME", "plants"), ("PLANTS_TOKEN_SHA256", &digest)]).unwrap();
        assert_eq!(config.table_name, "plants");
    }

    #[test]
    fn without_any_token_verifier_the_function_refuses_to_start() {
        for vars in [
            vec![("TABLE_NAME", "plants")],
            vec![("TABLE_NAME", "plants"), ("PLANTS_TOKEN_SHA256", "")],
            vec![("TABLE_NAME", "plants"), ("PLANTS_TOKEN_SHA256", " , ")],
        ] {
            assert_eq!(config(&vars).unwrap_err(), ConfigError::NoVerifier, "{vars:?}");
        }
        assert!(
            ConfigError::NoVerifier
                .to_string()
                .contains("PLANTS_TOKEN_SHA256")
        );
        assert!(ConfigError::NoVerifier.to_string().contains("PLANTS_JWT_ISSUER"));
    }

    #[test]
    fn a_missing_table_name_is_named() {
        let digest = StaticTokens::digest_hex("dev");
        for table in [None, Some(""), Some("  ")] {
            let mut vars = vec![("PLANTS_TOKEN_SHA256", digest.as_str())];
            vars.extend(table.map(|table| ("TABLE_NAME", table)));
            assert_eq!(
                config(&vars).unwrap_err(),
                ConfigError::MissingTableName,
                "{table:?}"
            );
        }
        assert!(
            ConfigError::MissingTableName
                .to_string()
                .starts_with("TABLE_NAME")
        );
    }

    #[test]
    fn a_malformed_digest_is_refused_with_its_position() {
        let digest = StaticTokens::digest_hex("dev");
        let list = format!("{digest},plaintext-token");
        let err = config(&[("TABLE_NAME", "plants"), ("PLANTS_TOKEN_SHA256", &list)]).unwrap_err();
        assert_eq!(err, ConfigError::InvalidTokenDigest { position: 2 });
        assert!(err.to_string().starts_with("PLANTS_TOKEN_SHA256 entry 2"));
    }

    #[test]
    fn a_jwt_issuer_is_refused_rather_than_silently_ignored() {
        let digest = StaticTokens::digest_hex("dev");
        let vars = [
            ("TABLE_NAME", "plants"),
            ("PLANTS_TOKEN_SHA256", digest.as_str()),
            ("PLANTS_JWT_ISSUER", "https://issuer.example"),
        ];
        assert_eq!(config(&vars).unwrap_err(), ConfigError::JwtNotAvailable);
    }
}
