//! Log setup: Lambda's advanced logging controls (`AWS_LAMBDA_LOG_FORMAT`,
//! `AWS_LAMBDA_LOG_LEVEL`) and, when Lambda sets no level, `RUST_LOG`, as
//! `lambda_http`'s default subscriber reads them, with the host's trace
//! layer on. The host never writes an invocation's raw event.

use lambda_http::tracing::Subscriber;
use lambda_http::tracing::subscriber::filter::Directive;
use lambda_http::tracing::subscriber::filter::{EnvFilter, LevelFilter};
use lambda_http::tracing::subscriber::fmt::MakeWriter;
use lambda_http::tracing::subscriber::layer::SubscriberExt as _;
use lambda_http::tracing::subscriber::registry::LookupSpan;
use lambda_http::tracing::subscriber::util::SubscriberInitExt;
use lambda_http::tracing::subscriber::{Registry, fmt};

use crate::env::LambdaEnv;

use self::filter::Filter;

mod filter;
mod json;

/// Installs the subscriber that [`crate::run`] installs, for a `main` that
/// logs before it calls `run`: where an example of `lambda_http` calls
/// `lambda_http::tracing::init_default_subscriber()`. It reads the same
/// variables, writes the same lines, and adds the trace's
/// [`crate::trace::layer`], so that the function's `tracing` spans reach
/// its traces. A subscriber installed already is kept.
pub fn init_default_subscriber() {
    init(&LambdaEnv::read());
}

/// Installs the host's subscriber as the global one, with the trace's
/// [`crate::trace::layer`] on it, unless the function installed its own
/// first (which is then kept as it is: a library never panics because a
/// subscriber is there).
pub(crate) fn init(env: &LambdaEnv) {
    let filter = filter(env.log_level.as_deref(), env.rust_log.as_deref());
    // `try_init` fails only when a subscriber is installed already.
    let _ = if env.log_json {
        json_with(filter, std::io::stdout)
            .with(crate::trace::layer())
            .try_init()
    } else {
        Registry::default()
            .with(
                fmt::layer()
                    .with_target(false)
                    // Lambda timestamps every line itself.
                    .without_time()
                    .with_writer(std::io::stdout)
                    // As `fmt()`'s subscriber does; a layer's default is off.
                    .log_internal_errors(true),
            )
            .with(Filter::new(filter))
            .with(crate::trace::layer())
            .try_init()
    };
}

/// The JSON subscriber that [`crate::run`] installs when Lambda asks for
/// JSON logs, writing to `writer` instead of stdout: what a function's
/// tests use to read its log lines as Lambda will receive them. The
/// event's fields are top-level keys, as Powertools writes them (`service`,
/// `cold_start`, `function_request_id`, …), not nested under `fields`, so
/// that CloudWatch Logs Insights queries name them directly. A line written
/// while an invocation is served also carries that invocation's ids under
/// `span` (the span the invocation loop opens), which tells lines apart when
/// invocations run at once; the list of enclosing spans is left out, as it
/// would only repeat them.
pub fn json_subscriber<W>(
    level: Option<&str>,
    writer: W,
) -> impl Subscriber + for<'span> LookupSpan<'span> + Send + Sync + 'static
where
    W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
{
    json_with(filter(level, None), writer)
}

fn json_with<W>(
    filter: EnvFilter,
    writer: W,
) -> impl Subscriber + for<'span> LookupSpan<'span> + Send + Sync + 'static
where
    W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
{
    Registry::default()
        .with(
            fmt::layer()
                .fmt_fields(json::SpanFields)
                .event_format(json::JsonLine)
                .with_writer(writer)
                .log_internal_errors(true),
        )
        .with(Filter::new(filter))
}

/// The level Lambda asks for (`AWS_LAMBDA_LOG_LEVEL`; `FATAL` counts as
/// `ERROR`, anything unreadable as `INFO`): the logs' and the `tracing`
/// spans' that reach a trace.
pub(crate) fn level(level: Option<&str>) -> LevelFilter {
    match level.map(str::trim) {
        Some(level) if level.eq_ignore_ascii_case("fatal") => LevelFilter::ERROR,
        Some(level) => level.parse().unwrap_or(LevelFilter::INFO),
        None => LevelFilter::INFO,
    }
}

/// `AWS_LAMBDA_LOG_LEVEL` when Lambda sets it, else `RUST_LOG`'s
/// directives (`info`, `my_function=debug,warn`, …; any that cannot be
/// read are left out, `INFO` when none is left), else `INFO`: the order of
/// `lambda_http`'s default subscriber, except that Lambda's level is not
/// overridden by `RUST_LOG` there.
fn filter(level: Option<&str>, rust_log: Option<&str>) -> EnvFilter {
    let builder = EnvFilter::builder().with_default_directive(Directive::from(LevelFilter::INFO));
    match (level, rust_log) {
        (Some(level), _) => builder.parse_lossy(self::level(Some(level)).to_string()),
        (None, Some(directives)) => builder.parse_lossy(directives),
        (None, None) => builder.parse_lossy(""),
    }
}

/// The most verbose level the logs let through, at any target: the level
/// of the `tracing` spans that reach a trace.
pub(crate) fn max_level(env: &LambdaEnv) -> LevelFilter {
    filter(env.log_level.as_deref(), env.rust_log.as_deref())
        .max_level_hint()
        .unwrap_or(LevelFilter::TRACE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::tracing;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// A writer of log lines into memory, for this module's tests and
    /// `json`'s.
    #[derive(Clone, Default)]
    pub(super) struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Capture {
        pub(super) fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    impl Write for Capture {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Capture {
        type Writer = Capture;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    fn logged(level: Option<&str>, emit: impl FnOnce()) -> String {
        logged_with(level, None, emit)
    }

    fn logged_with(level: Option<&str>, rust_log: Option<&str>, emit: impl FnOnce()) -> String {
        let capture = Capture::default();
        let subscriber = json_with(filter(level, rust_log), capture.clone());
        tracing::dispatcher::with_default(&tracing::Dispatch::new(subscriber), emit);
        capture.text()
    }

    #[test]
    fn the_level_follows_aws_lambda_log_level() {
        let emit = || {
            tracing::debug!("a debug line");
            tracing::info!("an info line");
            tracing::error!("an error line");
        };
        let info = logged(None, emit);
        assert!(
            !info.contains("a debug line") && info.contains("an info line"),
            "{info}"
        );
        let debug = logged(Some("DEBUG"), emit);
        assert!(debug.contains("a debug line"), "{debug}");
        let fatal = logged(Some("FATAL"), emit);
        assert!(
            !fatal.contains("an info line") && fatal.contains("an error line"),
            "{fatal}"
        );
        let unreadable = logged(Some("loud"), emit);
        assert!(
            unreadable.contains("an info line") && !unreadable.contains("a debug line"),
            "{unreadable}"
        );
    }

    #[test]
    fn rust_log_sets_the_directives_when_lambda_sets_no_level() {
        let emit = || {
            tracing::debug!(target: "orders", "a debug line of orders");
            tracing::debug!(target: "billing", "a debug line of billing");
            tracing::info!(target: "billing", "an info line of billing");
        };
        let directives = logged_with(None, Some("orders=debug,info"), emit);
        assert!(directives.contains("a debug line of orders"), "{directives}");
        assert!(!directives.contains("a debug line of billing"), "{directives}");
        assert!(directives.contains("an info line of billing"), "{directives}");

        let lambda_first = logged_with(Some("INFO"), Some("debug"), emit);
        assert!(
            !lambda_first.contains("a debug line") && lambda_first.contains("an info line"),
            "AWS_LAMBDA_LOG_LEVEL wins: {lambda_first}"
        );

        let unreadable = logged_with(None, Some("=loud="), emit);
        assert!(
            unreadable.contains("an info line") && !unreadable.contains("a debug line"),
            "INFO when no directive can be read: {unreadable}"
        );
    }

    #[test]
    fn the_traced_level_is_the_most_verbose_the_logs_let_through() {
        let env = |level: Option<&str>, rust_log: Option<&str>| LambdaEnv {
            log_level: level.map(str::to_owned),
            rust_log: rust_log.map(str::to_owned),
            ..LambdaEnv::read()
        };
        assert_eq!(max_level(&env(None, None)), LevelFilter::INFO);
        assert_eq!(max_level(&env(Some("WARN"), Some("trace"))), LevelFilter::WARN);
        assert_eq!(
            max_level(&env(None, Some("orders=debug,warn"))),
            LevelFilter::DEBUG
        );
    }
}
