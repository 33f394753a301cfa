//! What a function gives the host: something that turns a request into a
//! response.

use lambda_http::{Body, Request, Response};

/// A function's request handler. Every request gets a response: there is
/// no error path, because an `Err` out of a Lambda HTTP handler reaches the
/// client as a bare 502 from API Gateway. Expected failures are responses.
pub trait Handler: Send + Sync + 'static {
    /// Serves one request. The request carries the invocation's
    /// `lambda_runtime::Context` (`RequestExt::lambda_context_ref`), the
    /// front door's request context, and [`crate::envelope::Repairs`].
    fn call(&self, request: Request) -> impl Future<Output = Response<Body>> + Send;

    /// Resolves when work the handler started behind an answer (a cache
    /// refresh, say) has ended. On classic Lambda the host awaits it after
    /// each answer, before it asks for the next invocation and the
    /// environment may be frozen. Nothing by default.
    fn settled(&self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }
}

/// A [`Handler`] from an async function or closure, as `lambda_http`'s
/// `service_fn` makes a service.
pub fn handler_fn<F, Fut>(f: F) -> HandlerFn<F>
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<Body>> + Send,
{
    HandlerFn(f)
}

/// The [`Handler`] that [`handler_fn`] returns.
#[derive(Debug, Clone, Copy)]
pub struct HandlerFn<F>(F);

impl<F, Fut> Handler for HandlerFn<F>
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<Body>> + Send,
{
    fn call(&self, request: Request) -> impl Future<Output = Response<Body>> + Send {
        (self.0)(request)
    }
}
