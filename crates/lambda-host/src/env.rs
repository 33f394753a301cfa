//! Lambda's environment contract: the variables Lambda (or an emulator
//! such as `cargo lambda watch`) sets for the function, read here and
//! nowhere else in this crate. A value Lambda would never set is a reason
//! not to start, with one line naming the variable.

use std::ffi::OsString;
use std::fmt;
use std::num::NonZeroU32;

use lambda_http::http::Uri;
use lambda_http::lambda_runtime::Config as FunctionConfig;

/// Set by Lambda on Managed Instances: invocations one environment takes at once.
const MAX_CONCURRENCY: &str = "AWS_LAMBDA_MAX_CONCURRENCY";
const RUNTIME_API: &str = "AWS_LAMBDA_RUNTIME_API";

/// What stops the function before it serves anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// The Runtime API's address, from `AWS_LAMBDA_RUNTIME_API`.
pub(crate) fn runtime_api() -> Result<Uri, StartError> {
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

/// The function's name, memory, version and log names, read once
/// (`lambda_runtime`'s own `Config::from_env` panics where this returns an
/// error).
pub(crate) fn function_config() -> Result<FunctionConfig, StartError> {
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

/// Lambda's advanced logging controls: JSON lines or text, and the level.
pub(crate) fn log_controls() -> (bool, Option<String>) {
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|format| format.eq_ignore_ascii_case("json"));
    (json, std::env::var("AWS_LAMBDA_LOG_LEVEL").ok())
}

/// `AWS_CA_BUNDLE`, the PEM file the other AWS SDKs and the CLI read, when
/// set and not empty.
pub(crate) fn ca_bundle() -> Option<OsString> {
    std::env::var_os(crate::sdk::CA_BUNDLE).filter(|path| !path.is_empty())
}

/// What the tracer needs of Lambda's environment: the X-Ray daemon's
/// address (unset: tracing is off), the names of the service and the
/// function, what the spans' resource says of it (as ADOT's Lambda layer
/// sets `OTEL_RESOURCE_ATTRIBUTES` from Lambda's variables), ADOT's switch
/// for Application Signals (only `true` turns it on, as in ADOT) and the
/// logs' level.
pub(crate) fn tracing() -> crate::trace::TraceEnv {
    let get = |name| {
        std::env::var(name)
            .ok()
            .filter(|value: &String| !value.trim().is_empty())
    };
    crate::trace::TraceEnv {
        daemon_address: get(crate::trace::DAEMON_ADDRESS),
        otel_service_name: get("OTEL_SERVICE_NAME"),
        powertools_service_name: get("POWERTOOLS_SERVICE_NAME"),
        region: get("AWS_REGION"),
        function_name: get("AWS_LAMBDA_FUNCTION_NAME"),
        function_version: get("AWS_LAMBDA_FUNCTION_VERSION"),
        log_stream_name: get("AWS_LAMBDA_LOG_STREAM_NAME"),
        log_group_name: get("AWS_LAMBDA_LOG_GROUP_NAME"),
        application_signals: get(crate::trace::APPLICATION_SIGNALS)
            .is_some_and(|value| value.trim().eq_ignore_ascii_case("true")),
        log_level: None,
    }
}

/// A variable the AWS SDK reads itself (credentials, region), so that
/// set-up can skip providers it will not need.
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
