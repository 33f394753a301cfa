//! The logs' filter: `EnvFilter`, told of spans only when its directives
//! can need them. `EnvFilter` keeps state per span only for a directive
//! that names a span or a field's value (`[span{field=value}]=level`), yet
//! takes a lock and looks the span up on every span's creation, enter,
//! exit and close; the host's invocation span is entered on every poll of
//! the invocation.

use lambda_http::tracing::span::{Attributes, Id, Record};
use lambda_http::tracing::subscriber::filter::{EnvFilter, LevelFilter};
use lambda_http::tracing::subscriber::layer::{Context, Layer};
use lambda_http::tracing::{Metadata, Subscriber};
use tracing_core::subscriber::Interest;

/// `EnvFilter`, whose span callbacks are skipped when no directive needs
/// them: then it decides what is enabled exactly as `EnvFilter` alone.
#[derive(Debug)]
pub(super) struct Filter {
    env: EnvFilter,
    /// Whether a directive is on spans or field values.
    spans: bool,
}

impl Filter {
    pub(super) fn new(env: EnvFilter) -> Self {
        // `EnvFilter` writes its directives back as they were read, with
        // brackets for a span or fields, which every directive that keeps
        // state per span has. A static directive on field names has them
        // too, and is then told of spans it does not need: harmless.
        let spans = env.to_string().contains('[');
        Self { env, spans }
    }
}

impl<S: Subscriber> Layer<S> for Filter {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        Layer::<S>::register_callsite(&self.env, metadata)
    }

    fn enabled(&self, metadata: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        Layer::<S>::enabled(&self.env, metadata, ctx)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Layer::<S>::max_level_hint(&self.env)
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if self.spans {
            Layer::<S>::on_new_span(&self.env, attrs, id, ctx);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if self.spans {
            Layer::<S>::on_record(&self.env, id, values, ctx);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if self.spans {
            Layer::<S>::on_enter(&self.env, id, ctx);
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if self.spans {
            Layer::<S>::on_exit(&self.env, id, ctx);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if self.spans {
            Layer::<S>::on_close(&self.env, id, ctx);
        }
    }
}

#[cfg(test)]
mod tests;
