//! The smallest function on the host: a `service_fn`, as for
//! `lambda_http::run`, that answers every request with the path the client
//! asked of the API (without the stage or a custom domain's mapping key).

use lambda_host::ApiPath;
use lambda_http::{Body, Error, Request, Response, service_fn};

async fn hello(request: Request) -> Result<Response<Body>, Error> {
    let path = request.extensions().get::<ApiPath>().map_or("/", ApiPath::as_str);
    Ok(Response::new(Body::from(format!("hello from {path}"))))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_host::run(service_fn(hello)).await
}
