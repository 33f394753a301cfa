//! Lambda's environment contract: the variables Lambda (or an emulator
//! such as `cargo lambda watch`) sets for the function, read here and
//! nowhere else in this crate. A value Lambda would never set is a reason
//! not to start, with one line naming the variable.

use std::fmt;
use std::num::NonZeroU32;

use lambda_http::http::Uri;
use lambda_http::lambda_runtime::Config as FunctionConfig;

use crate::trace::{APPLICATION_SIGNALS, DAEMON_ADDRESS, TraceEnv};

/// Set by Lambda on Managed Instances: invocations one environment takes at once.
const MAX_CONCURRENCY: &str = "AWS_LAMBDA_MAX_CONCURRENCY";
const RUNTIME_API: &str = "AWS_LAMBDA_RUNTIME_API";

/// What stops the function before it serves anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartError {
    /// A variable Lambda always sets is missing.
    Missing(&'static str),
    /// A variable has a value Lambda would not set.
    Invalid(&'static str),
    /// A count that must be a positive integer is not.
    NotPositiveInteger(&'static str),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing(name) => write!(
                f,
                "{name} is not set: this binary runs inside AWS Lambda (or under `cargo lambda watch`), which sets it"
            ),
            Self::Invalid(name) => write!(f, "{name} has a value that is not what AWS Lambda sets"),
            Self::NotPositiveInteger(name) => write!(
                f,
                "{name} must be a positive integer: how many invocations this execution environment takes at once (unset: one)"
            ),
        }
    }
}

impl std::error::Error for StartError {}

/// How many invocations Lambda gives this execution environment at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concurrency(NonZeroU32);

impl Concurrency {
    /// Classic Lambda: one invocation at a time.
    pub const ONE: Self = Self(NonZeroU32::MIN);

    /// From `AWS_LAMBDA_MAX_CONCURRENCY`: unset is one; anything but a
    /// positive integer (Lambda sets 1 to 1600 today) is a reason not to
    /// start, rather than a guess that would serve fewer invocations than
    /// Lambda sends, or more.
    pub fn from_env() -> Result<Self, StartError> {
        match std::env::var(MAX_CONCURRENCY) {
            Err(std::env::VarError::NotPresent) => Ok(Self::ONE),
            Err(std::env::VarError::NotUnicode(_)) => Err(StartError::NotPositiveInteger(MAX_CONCURRENCY)),
            Ok(value) => Self::parse(&value),
        }
    }

    /// `invocations` at once, for [`crate::Lambda::with_concurrency`] where
    /// the environment does not say (an emulator, a test's Runtime API).
    pub const fn new(invocations: NonZeroU32) -> Self {
        Self(invocations)
    }

    /// Digits only: no sign, no blanks, not zero.
    fn parse(value: &str) -> Result<Self, StartError> {
        value
            .bytes()
            .all(|byte| byte.is_ascii_digit())
            .then(|| value.parse().ok())
            .flatten()
            .map(Self)
            .ok_or(StartError::NotPositiveInteger(MAX_CONCURRENCY))
    }

    /// The number of invocations at once.
    pub fn get(self) -> u32 {
        self.0.get()
    }

    /// More than one at once: Lambda Managed Instances.
    pub fn is_concurrent(self) -> bool {
        self.get() > 1
    }
}

/// Lambda's environment, read once at start-up: what the host's modules
/// are handed, rather than each reading variables of its own.
#[derive(Debug, Clone)]
pub(crate) struct LambdaEnv {
    pub runtime_api: Result<Uri, StartError>,
    pub function: Result<FunctionConfig, StartError>,
    pub concurrency: Result<Concurrency, StartError>,
    /// `AWS_LAMBDA_LOG_FORMAT` is `JSON`.
    pub log_json: bool,
    /// `AWS_LAMBDA_LOG_LEVEL`, as set.
    pub log_level: Option<String>,
    /// `RUST_LOG`, as set: the logs' directives when Lambda sets no level.
    pub rust_log: Option<String>,
    /// `AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH` is set (to anything), as
    /// `lambda_http` reads it: a REST API's stage stays out of the URI.
    pub ignore_stage_in_path: bool,
    /// What the tracer needs (its level is the logs', set by the caller).
    pub trace: TraceEnv,
}

impl LambdaEnv {
    pub(crate) fn read() -> Self {
        let get = |name| {
            std::env::var(name)
                .ok()
                .filter(|value: &String| !value.is_empty())
        };
        Self {
            runtime_api: runtime_api(),
            function: function_config(),
            concurrency: Concurrency::from_env(),
            log_json: get("AWS_LAMBDA_LOG_FORMAT").is_some_and(|format| format.eq_ignore_ascii_case("json")),
            log_level: get("AWS_LAMBDA_LOG_LEVEL"),
            rust_log: get("RUST_LOG"),
            ignore_stage_in_path: std::env::var_os(IGNORE_STAGE_IN_PATH).is_some(),
            trace: TraceEnv {
                daemon_address: get(DAEMON_ADDRESS).filter(|value| !value.trim().is_empty()),
                otel_service_name: get("OTEL_SERVICE_NAME"),
                powertools_service_name: get("POWERTOOLS_SERVICE_NAME"),
                region: get("AWS_REGION"),
                function_name: get("AWS_LAMBDA_FUNCTION_NAME"),
                function_version: get("AWS_LAMBDA_FUNCTION_VERSION"),
                log_stream_name: get("AWS_LAMBDA_LOG_STREAM_NAME"),
                log_group_name: get("AWS_LAMBDA_LOG_GROUP_NAME"),
                // Only `true` turns it on, as in ADOT.
                application_signals: get(APPLICATION_SIGNALS)
                    .is_some_and(|value| value.trim().eq_ignore_ascii_case("true")),
                log_level: None,
            },
        }
    }
}

const IGNORE_STAGE_IN_PATH: &str = "AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH";

/// Names a PEM file whose certificates the AWS SDKs and the CLI trust in
/// place of their built-in roots.
#[cfg(feature = "sdk")]
pub(crate) const CA_BUNDLE: &str = "AWS_CA_BUNDLE";

/// The Runtime API's address, from `AWS_LAMBDA_RUNTIME_API`.
fn runtime_api() -> Result<Uri, StartError> {
    let address = std::env::var(RUNTIME_API).map_err(|_| StartError::Missing(RUNTIME_API))?;
    endpoint(&address).ok_or(StartError::Invalid(RUNTIME_API))
}

/// Lambda sets `host:port`; emulators such as `cargo lambda watch` set a
/// whole URL with a base path (`http://127.0.0.1:9000/.rt`), which the
/// runtime's client also accepts.
fn endpoint(address: &str) -> Option<Uri> {
    let url = if address.contains("://") {
        address.to_owned()
    } else {
        format!("http://{address}")
    };
    Uri::try_from(url)
        .ok()
        .filter(|uri| uri.host().is_some_and(|host| !host.is_empty()))
}

/// The function's name, memory, version and log names (`lambda_runtime`'s
/// own `Config::from_env` panics where this returns an error).
fn function_config() -> Result<FunctionConfig, StartError> {
    let var = |name: &'static str| std::env::var(name).map_err(|_| StartError::Missing(name));
    Ok(FunctionConfig {
        function_name: var("AWS_LAMBDA_FUNCTION_NAME")?,
        memory: var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")?
            .parse()
            .map_err(|_| StartError::Invalid("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"))?,
        version: var("AWS_LAMBDA_FUNCTION_VERSION")?,
        log_stream: var("AWS_LAMBDA_LOG_STREAM_NAME").unwrap_or_default(),
        log_group: var("AWS_LAMBDA_LOG_GROUP_NAME").unwrap_or_default(),
    })
}

/// `AWS_CA_BUNDLE`, when set and not empty.
#[cfg(feature = "sdk")]
pub(crate) fn ca_bundle() -> Option<std::ffi::OsString> {
    std::env::var_os(CA_BUNDLE).filter(|path| !path.is_empty())
}

/// A variable the AWS SDK reads itself (credentials, region), so that
/// set-up can skip providers it will not need.
#[cfg(feature = "sdk")]
pub(crate) fn sdk_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_concurrency_is_a_positive_integer_and_nothing_else() {
        for (value, expected) in [
            ("1", Some(1)),
            ("8", Some(8)),
            ("1600", Some(1600)),
            ("0", None),
            ("", None),
            ("-1", None),
            ("+8", None),
            (" 8", None),
            ("8 ", None),
            ("8.0", None),
            ("eight", None),
            ("4294967296", None),
        ] {
            assert_eq!(
                Concurrency::parse(value).map(Concurrency::get).ok(),
                expected,
                "{value:?}"
            );
        }
        assert_eq!(
            Concurrency::parse("x"),
            Err(StartError::NotPositiveInteger(MAX_CONCURRENCY))
        );
    }

    #[test]
    fn the_runtime_api_is_found_as_lambda_and_as_emulators_name_it() {
        for (address, expected) in [
            ("127.0.0.1:9001", Some("http://127.0.0.1:9001/")),
            ("169.254.100.1:9001", Some("http://169.254.100.1:9001/")),
            ("http://127.0.0.1:9000/.rt", Some("http://127.0.0.1:9000/.rt")),
            ("", None),
            ("http://", None),
            ("not a host", None),
        ] {
            assert_eq!(
                endpoint(address).map(|uri| uri.to_string()).as_deref(),
                expected,
                "{address:?}"
            );
        }
    }
}
