//! Log setup: Lambda's advanced logging controls (`AWS_LAMBDA_LOG_FORMAT`,
//! `AWS_LAMBDA_LOG_LEVEL`), plus one guarantee the runtime's default setup
//! does not give: the raw event, which carries the `Authorization` header,
//! is never written, whatever the level.

use lambda_http::tracing::Subscriber;
use lambda_http::tracing::subscriber::filter::{EnvFilter, LevelFilter};
use lambda_http::tracing::subscriber::fmt::MakeWriter;
use lambda_http::tracing::subscriber::layer::SubscriberExt as _;
use lambda_http::tracing::subscriber::registry::LookupSpan;
use lambda_http::tracing::subscriber::util::SubscriberInitExt;
use lambda_http::tracing::subscriber::{self, fmt};

use crate::env::LambdaEnv;

mod json;

/// `lambda_runtime` logs every raw invocation payload at TRACE under this
/// target; we cap it at DEBUG so a bearer token can never reach the logs.
const RAW_EVENT_TARGET: &str = "lambda_runtime::layers::api_response";

/// Installs the host's subscriber as the global one, with the trace's
/// [`crate::trace::layer`] on it, unless the function installed its own
/// first (which is then kept as it is: a library never panics because a
/// subscriber is there; the function adds the layer to its own).
pub(crate) fn init(env: &LambdaEnv) {
    let level = env.log_level.as_deref();
    // `try_init` fails only when a subscriber is installed already.
    let _ = if env.log_json {
        json_subscriber(level, std::io::stdout)
            .with(crate::trace::layer())
            .try_init()
    } else {
        builder(level, std::io::stdout)
            .finish()
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
    builder(level, writer)
        .fmt_fields(json::SpanFields)
        .event_format(json::JsonLine)
        .finish()
}

type Builder<W> = fmt::SubscriberBuilder<
    fmt::format::DefaultFields,
    fmt::format::Format<fmt::format::Full, ()>,
    EnvFilter,
    W,
>;

fn builder<W>(level: Option<&str>, writer: W) -> Builder<W>
where
    W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
{
    subscriber::fmt()
        .with_target(false)
        // Lambda timestamps every line itself.
        .without_time()
        .with_env_filter(filter(level))
        .with_writer(writer)
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

/// [`level`], with the raw-event target capped at DEBUG.
fn filter(level: Option<&str>) -> EnvFilter {
    let level = self::level(level);
    let capped = level.min(LevelFilter::DEBUG);
    EnvFilter::builder().parse_lossy(format!("{level},{RAW_EVENT_TARGET}={capped}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::tracing;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

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
        let capture = Capture::default();
        let subscriber = json_subscriber(level, capture.clone());
        tracing::dispatcher::with_default(&tracing::Dispatch::new(subscriber), emit);
        String::from_utf8(capture.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn the_raw_event_is_never_logged_even_at_trace_level() {
        let output = logged(Some("TRACE"), || {
            tracing::trace!(target: "lambda_runtime::layers::api_response", body = "Bearer s3cret", "raw JSON event");
            tracing::debug!(target: "lambda_runtime::layers::api_response", "kept at debug");
            tracing::trace!(target: "my_function", "other trace lines still flow");
        });
        assert!(!output.contains("s3cret"), "{output}");
        assert!(output.contains("kept at debug"), "{output}");
        assert!(output.contains("other trace lines still flow"), "{output}");
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
}
