//! The function's configuration, read once at start-up. A problem here stops
//! the function before it serves anything, with one line naming the variable.

use std::fmt;

use crate::auth::jwt::{DEFAULT_SCOPE, JwtSettings, JwtVerifier, SettingError};
use crate::auth::{Authenticator, StaticTokens};
use crate::telemetry::{TelemetrySettingError, TelemetrySettings};

#[derive(Debug, Clone)]
pub struct Config {
    pub table_name: String,
    pub authenticator: Authenticator,
    /// Open the connection to DynamoDB during init (`PLANTS_PREWARM`,
    /// default on), so that the first request does not pay for it.
    pub prewarm: bool,
    /// The Powertools variables: service name, metric namespace, metrics on/off.
    pub telemetry: TelemetrySettings,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    MissingTableName,
    InvalidTokenDigest { position: usize },
    InvalidJwtIssuer,
    MissingJwtAudience,
    InvalidJwtJwksUrl,
    InvalidJwtScope,
    JwtWithoutIssuer(&'static str),
    NoVerifier,
    InvalidPrewarm,
    Telemetry(TelemetrySettingError),
    InvalidMetricsDisabled,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingTableName => f.write_str("TABLE_NAME is not set: set it to the name of the DynamoDB table that stores the plants"),
            Self::InvalidTokenDigest { position } => write!(
                f,
                "PLANTS_TOKEN_SHA256 entry {position} is not a SHA-256 hex digest (64 hex digits); make one with: printf %s \"$TOKEN\" | sha256sum"
            ),
            Self::InvalidJwtIssuer => f.write_str(
                "PLANTS_JWT_ISSUER must be the issuer's https URL without a query (http only for loopback hosts), exactly as in the tokens' iss claim",
            ),
            Self::MissingJwtAudience => f.write_str(
                "PLANTS_JWT_AUDIENCE is not set: with PLANTS_JWT_ISSUER, set the comma-separated accepted audiences (aud, or client_id when aud is absent)",
            ),
            Self::InvalidJwtJwksUrl => f.write_str(
                "PLANTS_JWT_JWKS_URL must be an https URL (http only for loopback hosts); unset it to use the issuer's discovery document",
            ),
            Self::InvalidJwtScope => f.write_str(
                "PLANTS_JWT_SCOPE must be one OAuth scope: printable ASCII without spaces, double quotes or backslashes",
            ),
            // Someone meant to turn JWTs on, and would otherwise not notice
            // that they are off.
            Self::JwtWithoutIssuer(variable) => write!(
                f,
                "{variable} is set but PLANTS_JWT_ISSUER is not: set PLANTS_JWT_ISSUER to turn JWT verification on, or unset {variable}"
            ),
            Self::NoVerifier => f.write_str(
                "no way to verify bearer tokens: set PLANTS_TOKEN_SHA256 (comma-separated SHA-256 hex digests of the accepted tokens) or PLANTS_JWT_ISSUER",
            ),
            Self::InvalidPrewarm => f.write_str(
                "PLANTS_PREWARM must be 1 or 0 (or true/false, on/off, yes/no): whether to open the connection to DynamoDB during init (default 1)",
            ),
            Self::Telemetry(TelemetrySettingError::ServiceName) => f.write_str(
                "POWERTOOLS_SERVICE_NAME must be at most 1024 printable ASCII characters: it is the service log key and metric dimension (default plant-store)",
            ),
            Self::Telemetry(TelemetrySettingError::Namespace) => f.write_str(
                "POWERTOOLS_METRICS_NAMESPACE must be at most 255 characters from letters, digits, spaces and . - _ / # :, not starting with AWS/ (default PlantStore)",
            ),
            Self::InvalidMetricsDisabled => f.write_str(
                "POWERTOOLS_METRICS_DISABLED must be true or false (or 1/0, on/off, yes/no): whether to stop writing CloudWatch metrics (default false)",
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
        let jwt = jwt_settings(&get)?.map(JwtVerifier::new);
        let authenticator = Authenticator::new(static_tokens, jwt).ok_or(ConfigError::NoVerifier)?;
        let prewarm = match get("PLANTS_PREWARM") {
            Some(value) => parse_switch(&value).ok_or(ConfigError::InvalidPrewarm)?,
            None => true,
        };

        let service = get("POWERTOOLS_SERVICE_NAME");
        let namespace = get("POWERTOOLS_METRICS_NAMESPACE");
        let mut telemetry = TelemetrySettings::new(service.as_deref(), namespace.as_deref())
            .map_err(ConfigError::Telemetry)?;
        // Powertools reads only "true" as off; anything unreadable is a
        // mistake worth stopping for rather than guessing.
        if let Some(value) = get("POWERTOOLS_METRICS_DISABLED") {
            telemetry.metrics = !parse_switch(&value).ok_or(ConfigError::InvalidMetricsDisabled)?;
        }

        Ok(Self {
            table_name: table_name.trim().to_owned(),
            authenticator,
            prewarm,
            telemetry,
        })
    }
}

/// An on/off setting: `1`/`0`, `true`/`false`, `on`/`off`, `yes`/`no`, in
/// any case. Anything else is a mistake worth stopping for.
fn parse_switch(value: &str) -> Option<bool> {
    let value = value.trim();
    let is = |words: [&str; 4]| words.iter().any(|word| value.eq_ignore_ascii_case(word));
    if is(["1", "true", "on", "yes"]) {
        Some(true)
    } else if is(["0", "false", "off", "no"]) {
        Some(false)
    } else {
        None
    }
}

/// The `PLANTS_JWT_*` variables, or `None` when JWTs are off. Values are
/// trimmed; audiences are comma-separated, blanks around commas ignored.
fn jwt_settings(get: &impl Fn(&str) -> Option<String>) -> Result<Option<JwtSettings>, ConfigError> {
    let audience = get("PLANTS_JWT_AUDIENCE");
    let jwks_url = get("PLANTS_JWT_JWKS_URL");
    let Some(issuer) = get("PLANTS_JWT_ISSUER") else {
        // PLANTS_JWT_SCOPE alone is fine: it has a default, and the SAM
        // template always passes it.
        return match (audience, jwks_url) {
            (Some(_), _) => Err(ConfigError::JwtWithoutIssuer("PLANTS_JWT_AUDIENCE")),
            (_, Some(_)) => Err(ConfigError::JwtWithoutIssuer("PLANTS_JWT_JWKS_URL")),
            (None, None) => Ok(None),
        };
    };
    let audience = audience.unwrap_or_default();
    let audiences: Vec<&str> = audience
        .split(',')
        .map(str::trim)
        .filter(|audience| !audience.is_empty())
        .collect();
    let scope = get("PLANTS_JWT_SCOPE");
    let scope = scope.as_deref().map_or(DEFAULT_SCOPE, str::trim);
    JwtSettings::new(
        issuer.trim(),
        &audiences,
        jwks_url.as_deref().map(str::trim),
        scope,
    )
    .map(Some)
    .map_err(|err| match err {
        SettingError::Issuer => ConfigError::InvalidJwtIssuer,
        SettingError::Audience => ConfigError::MissingJwtAudience,
        SettingError::JwksUrl => ConfigError::InvalidJwtJwksUrl,
        SettingError::Scope => ConfigError::InvalidJwtScope,
    })
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
    fn the_init_time_prewarm_is_on_unless_switched_off() {
        let digest = StaticTokens::digest_hex("dev");
        for (value, expected) in [
            (None, true),
            (Some(""), true),
            (Some("1"), true),
            (Some(" TRUE "), true),
            (Some("on"), true),
            (Some("0"), false),
            (Some("false"), false),
            (Some("Off"), false),
            (Some("no"), false),
        ] {
            let mut vars = vec![("TABLE_NAME", "plants"), ("PLANTS_TOKEN_SHA256", digest.as_str())];
            vars.extend(value.map(|value| ("PLANTS_PREWARM", value)));
            assert_eq!(config(&vars).unwrap().prewarm, expected, "{value:?}");
        }
    }

    #[test]
    fn an_unreadable_prewarm_switch_is_refused_naming_the_variable() {
        let digest = StaticTokens::digest_hex("dev");
        for value in ["2", "disabled", "nope"] {
            let vars = [
                ("TABLE_NAME", "plants"),
                ("PLANTS_TOKEN_SHA256", digest.as_str()),
                ("PLANTS_PREWARM", value),
            ];
            let err = config(&vars).unwrap_err();
            assert_eq!(err, ConfigError::InvalidPrewarm, "{value}");
            assert!(err.to_string().starts_with("PLANTS_PREWARM"), "{err}");
        }
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

    const ISSUER: &str = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Example";

    #[test]
    fn an_issuer_and_an_audience_turn_jwts_on_with_or_without_static_tokens() {
        let digest = StaticTokens::digest_hex("dev");
        let jwt_only = [
            ("TABLE_NAME", "plants"),
            ("PLANTS_JWT_ISSUER", ISSUER),
            ("PLANTS_JWT_AUDIENCE", " client-a , client-b ,"),
        ];
        let rendered = format!("{:?}", config(&jwt_only).unwrap().authenticator);
        assert!(rendered.contains(ISSUER), "{rendered}");
        assert!(rendered.contains("client-b"), "{rendered}");
        assert!(rendered.contains("\"plants:write\""), "{rendered}");

        let both = [jwt_only.as_slice(), &[("PLANTS_TOKEN_SHA256", digest.as_str())]].concat();
        let rendered = format!("{:?}", config(&both).unwrap().authenticator);
        assert!(
            rendered.contains("StaticTokens(1 digests)") && rendered.contains(ISSUER),
            "{rendered}"
        );
    }

    #[test]
    fn the_scope_defaults_to_plants_write_and_can_be_changed() {
        for (scope, expected) in [
            (None, "plants:write"),
            (Some(""), "plants:write"),
            (Some(" plants/admin "), "plants/admin"),
        ] {
            let mut vars = vec![
                ("TABLE_NAME", "plants"),
                ("PLANTS_JWT_ISSUER", ISSUER),
                ("PLANTS_JWT_AUDIENCE", "client-a"),
            ];
            vars.extend(scope.map(|scope| ("PLANTS_JWT_SCOPE", scope)));
            let rendered = format!("{:?}", config(&vars).unwrap().authenticator);
            assert!(
                rendered.contains(&format!("scope: \"{expected}\"")),
                "{scope:?}: {rendered}"
            );
        }
    }

    #[test]
    fn unusable_jwt_settings_are_refused_naming_the_variable() {
        use ConfigError::{InvalidJwtIssuer, InvalidJwtJwksUrl, InvalidJwtScope, MissingJwtAudience};
        let cases = [
            ("PLANTS_JWT_ISSUER", "http://issuer.example", InvalidJwtIssuer),
            ("PLANTS_JWT_ISSUER", "http://10.0.0.1/pool", InvalidJwtIssuer),
            ("PLANTS_JWT_ISSUER", "issuer.example", InvalidJwtIssuer),
            (
                "PLANTS_JWT_ISSUER",
                "https://user@issuer.example",
                InvalidJwtIssuer,
            ),
            (
                "PLANTS_JWT_ISSUER",
                "https://issuer.example/?tenant=1",
                InvalidJwtIssuer,
            ),
            ("PLANTS_JWT_ISSUER", "ftp://issuer.example", InvalidJwtIssuer),
            ("PLANTS_JWT_AUDIENCE", "", MissingJwtAudience),
            ("PLANTS_JWT_AUDIENCE", " , ", MissingJwtAudience),
            (
                "PLANTS_JWT_JWKS_URL",
                "http://issuer.example/jwks.json",
                InvalidJwtJwksUrl,
            ),
            ("PLANTS_JWT_JWKS_URL", "not a url", InvalidJwtJwksUrl),
            ("PLANTS_JWT_SCOPE", "plants:write plants:read", InvalidJwtScope),
            ("PLANTS_JWT_SCOPE", "plants\"write", InvalidJwtScope),
            ("PLANTS_JWT_SCOPE", "plants\\write", InvalidJwtScope),
            ("PLANTS_JWT_SCOPE", "plantes:écrire", InvalidJwtScope),
        ];
        for (variable, value, expected) in cases {
            let mut vars = vec![
                ("TABLE_NAME", "plants"),
                ("PLANTS_JWT_ISSUER", ISSUER),
                ("PLANTS_JWT_AUDIENCE", "client-a"),
            ];
            vars.retain(|(name, _)| *name != variable);
            vars.push((variable, value));
            let err = config(&vars).unwrap_err();
            assert_eq!(err, expected, "{variable}={value:?}");
            let message = err.to_string();
            assert!(message.starts_with(variable), "{message}");
            assert_eq!(message.lines().count(), 1, "{message}");
        }
    }

    #[test]
    fn loopback_issuers_may_use_plain_http() {
        for issuer in [
            "http://127.0.0.1:8080",
            "http://localhost:9000/realms/dev",
            "http://[::1]:8080/",
        ] {
            let vars = [
                ("TABLE_NAME", "plants"),
                ("PLANTS_JWT_ISSUER", issuer),
                ("PLANTS_JWT_AUDIENCE", "client-a"),
            ];
            assert!(config(&vars).is_ok(), "{issuer}");
        }
    }

    #[test]
    fn jwt_settings_without_an_issuer_are_refused_but_a_lone_scope_is_not() {
        let digest = StaticTokens::digest_hex("dev");
        for variable in ["PLANTS_JWT_AUDIENCE", "PLANTS_JWT_JWKS_URL"] {
            let vars = [
                ("TABLE_NAME", "plants"),
                ("PLANTS_TOKEN_SHA256", digest.as_str()),
                (variable, "x"),
            ];
            let err = config(&vars).unwrap_err();
            assert_eq!(err, ConfigError::JwtWithoutIssuer(variable));
            assert!(err.to_string().starts_with(variable), "{err}");
        }
        let vars = [
            ("TABLE_NAME", "plants"),
            ("PLANTS_TOKEN_SHA256", digest.as_str()),
            ("PLANTS_JWT_SCOPE", "plants:write"),
        ];
        assert!(config(&vars).is_ok());
        let vars = [("TABLE_NAME", "plants"), ("PLANTS_JWT_SCOPE", "plants:write")];
        assert_eq!(config(&vars).unwrap_err(), ConfigError::NoVerifier);
    }

    #[test]
    fn the_powertools_variables_give_the_service_namespace_and_switch() {
        let digest = StaticTokens::digest_hex("dev");
        let base = [("TABLE_NAME", "plants"), ("PLANTS_TOKEN_SHA256", digest.as_str())];
        assert_eq!(config(&base).unwrap().telemetry, TelemetrySettings::default());

        let mut vars = base.to_vec();
        vars.extend([
            ("POWERTOOLS_SERVICE_NAME", " plants-eu "),
            ("POWERTOOLS_METRICS_NAMESPACE", "Shop/Plants"),
            ("POWERTOOLS_METRICS_DISABLED", "TRUE"),
        ]);
        assert_eq!(
            config(&vars).unwrap().telemetry,
            TelemetrySettings {
                service: "plants-eu".to_owned(),
                namespace: "Shop/Plants".to_owned(),
                metrics: false,
            }
        );
        for off in ["false", "0", "No"] {
            let mut vars = base.to_vec();
            vars.push(("POWERTOOLS_METRICS_DISABLED", off));
            assert!(config(&vars).unwrap().telemetry.metrics, "{off}");
        }
    }

    #[test]
    fn unusable_powertools_variables_are_refused_naming_the_variable() {
        let digest = StaticTokens::digest_hex("dev");
        let cases = [
            (
                "POWERTOOLS_SERVICE_NAME",
                "plant\u{7}store",
                ConfigError::Telemetry(TelemetrySettingError::ServiceName),
            ),
            (
                "POWERTOOLS_METRICS_NAMESPACE",
                "AWS/Lambda",
                ConfigError::Telemetry(TelemetrySettingError::Namespace),
            ),
            (
                "POWERTOOLS_METRICS_DISABLED",
                "maybe",
                ConfigError::InvalidMetricsDisabled,
            ),
        ];
        for (name, value, error) in cases {
            let vars = [
                ("TABLE_NAME", "plants"),
                ("PLANTS_TOKEN_SHA256", digest.as_str()),
                (name, value),
            ];
            let err = config(&vars).unwrap_err();
            assert_eq!(err, error, "{name}={value}");
            assert!(err.to_string().starts_with(name), "{err}");
        }
    }
}
