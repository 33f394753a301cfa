//! Fetching the issuer's keys over HTTP: which URLs may be fetched, the
//! connector they go through, and the capped GETs of the discovery document
//! and the JWKS, each a CLIENT span of the trace.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::OnceLock;
use std::time::Duration;

use aws_smithy_http_client::Connector;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use aws_smithy_runtime_api::client::http::{HttpConnector, SharedHttpConnector};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_types::body::SdkBody;
use http_body_util::{BodyExt, Limited};
use lambda_http::http::header::{ACCEPT, CACHE_CONTROL, CONTENT_LENGTH, HeaderMap, USER_AGENT};
use lambda_http::http::{Request, StatusCode, Uri};
use lambda_http::tracing::field::Empty;
use lambda_http::tracing::{self, Instrument, Span};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::jwks::{JwksDocument, VerifyingKey};
use crate::log::ErrorChain;

const USER_AGENT_VALUE: &str = concat!("plant-store/", env!("CARGO_PKG_VERSION"));

/// The longest error message a fetch's span carries.
const MAX_SPAN_MESSAGE_BYTES: usize = 1024;

/// An `https` URL, or an `http` one whose host is a loopback address (tests
/// and issuers run on a developer's machine). No user info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchUrl(pub(super) Uri);

impl FetchUrl {
    pub fn parse(text: &str) -> Option<Self> {
        let uri: Uri = text.parse().ok()?;
        let authority = uri.authority()?;
        if authority.as_str().contains('@') {
            return None;
        }
        let host = authority.host();
        let loopback = host.eq_ignore_ascii_case("localhost")
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        match uri.scheme_str() {
            Some("https") => Some(Self(uri)),
            Some("http") if loopback => Some(Self(uri)),
            _ => None,
        }
    }
}

impl fmt::Display for FetchUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where the keys come from: a configured JWKS URL, or the one the
/// issuer's discovery document names.
pub(super) enum JwksSource {
    Url(FetchUrl),
    Discovery { document: FetchUrl, issuer: String },
}

/// Fetches the issuer's keys from `source`, each GET within `timeout` and
/// `max_bytes`.
pub(super) struct JwksFetcher {
    source: JwksSource,
    connector: Option<SharedHttpConnector>,
    /// Without `connector`, the AWS SDK's default one (the platform's
    /// roots, no proxy), made at the first fetch: what tests and any other
    /// caller that hands none get. The function hands the host's, which
    /// honours `AWS_CA_BUNDLE` and the proxy variables.
    default: OnceLock<Connector>,
    timeout: Duration,
    max_bytes: usize,
}

impl JwksFetcher {
    pub(super) fn new(
        source: JwksSource,
        connector: Option<SharedHttpConnector>,
        timeout: Duration,
        max_bytes: usize,
    ) -> Self {
        Self {
            source,
            connector,
            default: OnceLock::new(),
            timeout,
            max_bytes,
        }
    }

    fn connector(&self) -> &dyn HttpConnector {
        match &self.connector {
            Some(connector) => connector,
            None => self.default.get_or_init(|| {
                Connector::builder()
                    .tls_provider(tls::Provider::Rustls(CryptoMode::AwsLc))
                    .build()
            }),
        }
    }

    pub(super) async fn fetch(&self, known_jwks_uri: Option<FetchUrl>) -> Result<Fetched, FetchError> {
        let (jwks_uri, discovered) = match (&self.source, known_jwks_uri) {
            (JwksSource::Url(url), _) => (url.clone(), None),
            (JwksSource::Discovery { .. }, Some(url)) => (url, None),
            (JwksSource::Discovery { document, issuer }, None) => {
                let (discovery, _) = self.get_json::<DiscoveryDocument>(document).await?;
                if discovery.issuer != *issuer {
                    return Err(FetchError::DiscoveryIssuer {
                        document: document.to_string(),
                        named: discovery.issuer,
                    });
                }
                let url = discovered_jwks_uri(document, &discovery.jwks_uri).ok_or_else(|| {
                    FetchError::DiscoveryJwksUri {
                        document: document.to_string(),
                        jwks_uri: discovery.jwks_uri,
                    }
                })?;
                (url.clone(), Some(url))
            }
        };
        let (jwks, max_age) = self.get_json::<JwksDocument>(&jwks_uri).await?;
        Ok(Fetched {
            keys: jwks.usable_keys(),
            max_age,
            jwks_uri: discovered,
        })
    }

    /// One GET with the policy's timeout and size cap; the document and the
    /// response's `max-age`.
    async fn get_json<T: DeserializeOwned>(
        &self,
        url: &FetchUrl,
    ) -> Result<(T, Option<Duration>), FetchError> {
        let span = client_span(url);
        let exchange = async {
            let request = Request::get(url.0.clone())
                .header(ACCEPT, "application/json")
                .header(USER_AGENT, USER_AGENT_VALUE)
                .body(SdkBody::empty())
                .ok()
                .and_then(|request| HttpRequest::try_from(request).ok())
                .ok_or(FetchError::Request)?;
            let response = match self.connector().call(request).await {
                Ok(response) => response,
                Err(err) => {
                    failed(&span, "ConnectionError", &ErrorChain(&err).to_string());
                    return Err(FetchError::Transport(err));
                }
            };
            let status = response.status().as_u16();
            record_status(&span, status);
            let response = response
                .try_into_http1x()
                .map_err(|err| FetchError::Body(err.into()))?;
            if response.status() != StatusCode::OK {
                return Err(FetchError::Status(response.status()));
            }
            let max_age = max_age(response.headers());
            let declared = response
                .headers()
                .get(CONTENT_LENGTH)
                .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
            if declared.is_some_and(|length| length > self.max_bytes as u64) {
                return Err(FetchError::TooLarge);
            }
            let body = Limited::new(response.into_body(), self.max_bytes)
                .collect()
                .await
                .map_err(|err| {
                    if err.is::<http_body_util::LengthLimitError>() {
                        FetchError::TooLarge
                    } else {
                        FetchError::Body(err)
                    }
                })?
                .to_bytes();
            let document = serde_json::from_slice(&body).map_err(FetchError::Json)?;
            Ok((document, max_age))
        };
        match tokio::time::timeout(self.timeout, exchange.instrument(span.clone())).await {
            Ok(outcome) => outcome.map_err(|err| err.at(url)),
            Err(_) => {
                failed(&span, "TimeoutError", &FetchError::Timeout.to_string());
                Err(FetchError::Timeout.at(url))
            }
        }
    }
}

/// The span of one GET, with the attributes of an HTTP CLIENT span as
/// OpenTelemetry's conventions and ADOT's attribute generator name them:
/// the remote service is the host, the remote operation the method and the
/// path's first segment. A fetch during init or behind a request is in no
/// invocation's trace, so no trace keeps it.
fn client_span(url: &FetchUrl) -> Span {
    let host = url.0.host().unwrap_or("remote");
    let first_segment = url.0.path().split('/').nth(1).unwrap_or_default();
    let span = tracing::info_span!(
        "GET",
        otel.kind = "client",
        http.request.method = "GET",
        url.full = %url,
        server.address = host,
        server.port = Empty,
        aws.remote.service = host,
        aws.remote.operation = format_args!("GET /{first_segment}"),
        http.response.status_code = Empty,
        error.type = Empty,
        otel.status_code = Empty,
        otel.status_message = Empty,
    );
    if let Some(port) = url.0.port_u16() {
        span.record("server.port", port);
    }
    span
}

/// An answer came: a 4xx or 5xx makes the span an error, typed by the status.
fn record_status(span: &Span, status: u16) {
    span.record("http.response.status_code", status);
    if status >= 400 {
        span.record("error.type", tracing::field::display(status));
        span.record("otel.status_code", "error");
    }
}

/// No answer came: the span is an error of `kind`, its message cut to
/// `MAX_SPAN_MESSAGE_BYTES`.
fn failed(span: &Span, kind: &'static str, message: &str) {
    let mut end = message.len().min(MAX_SPAN_MESSAGE_BYTES);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    span.record("error.type", kind);
    span.record("otel.status_code", "error");
    span.record("otel.status_message", &message[..end]);
}

pub(super) struct Fetched {
    pub(super) keys: HashMap<String, Vec<VerifyingKey>>,
    pub(super) max_age: Option<Duration>,
    pub(super) jwks_uri: Option<FetchUrl>,
}

/// `max-age` from `Cache-Control`; `no-cache` and `no-store` count as 0.
fn max_age(headers: &HeaderMap) -> Option<Duration> {
    let mut max_age = None;
    for directive in headers
        .get_all(CACHE_CONTROL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
    {
        let (name, value) = directive.split_once('=').unwrap_or((directive, ""));
        let name = name.trim();
        if name.eq_ignore_ascii_case("no-cache") || name.eq_ignore_ascii_case("no-store") {
            return Some(Duration::ZERO);
        }
        if name.eq_ignore_ascii_case("max-age") {
            max_age = value
                .trim()
                .trim_matches('"')
                .parse()
                .ok()
                .map(Duration::from_secs);
        }
    }
    max_age
}

/// The `jwks_uri` a discovery document fetched from `document` gives, if it
/// may be fetched: `https`, or plain `http` (on loopback, as `FetchUrl`
/// wants) only when the document itself came over plain `http`, that is
/// from an issuer on loopback (the tests', `make run`'s). An https issuer
/// whose document points at plain http, even on loopback, is refused: on
/// Lambda, loopback is the Runtime API and the extensions, never an issuer.
fn discovered_jwks_uri(document: &FetchUrl, jwks_uri: &str) -> Option<FetchUrl> {
    let url = FetchUrl::parse(jwks_uri)?;
    (url.0.scheme_str() == Some("https") || document.0.scheme_str() == Some("http")).then_some(url)
}

#[derive(Deserialize)]
struct DiscoveryDocument {
    issuer: String,
    jwks_uri: String,
}

/// Why the keys could not be had.
#[derive(Debug)]
pub(super) enum FetchError {
    Request,
    Transport(ConnectorError),
    Status(StatusCode),
    TooLarge,
    Body(Box<dyn std::error::Error + Send + Sync>),
    Json(serde_json::Error),
    Timeout,
    /// The discovery document at `document` names another issuer.
    DiscoveryIssuer {
        document: String,
        named: String,
    },
    /// The discovery document at `document` gives a `jwks_uri` that may not
    /// be fetched.
    DiscoveryJwksUri {
        document: String,
        jwks_uri: String,
    },
    /// The task that fetched ended before the fetch did (the runtime shut
    /// down, or a panic).
    Abandoned,
    At(String, Box<FetchError>),
}

impl FetchError {
    fn at(self, url: &FetchUrl) -> Self {
        Self::At(url.to_string(), Box::new(self))
    }

    /// Whether the issuer's own discovery document contradicts the
    /// configuration: no retry heals that, so at start it is a reason to
    /// refuse to start rather than to serve 503s.
    pub(super) fn is_misconfiguration(&self) -> bool {
        matches!(self, Self::DiscoveryIssuer { .. } | Self::DiscoveryJwksUri { .. })
    }
}

/// Text from a remote document, in a log line or the refusal to start:
/// quoted and escaped, and cut after 120 characters.
struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 120;
        match self.0.char_indices().nth(SHOWN) {
            None => write!(f, "{:?}", self.0),
            Some((cut, _)) => write!(f, "{:?}…", &self.0[..cut]),
        }
    }
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Request => f.write_str("cannot build the request"),
            Self::Transport(err) => write!(f, "{}", ErrorChain(err)),
            Self::Status(status) => write!(f, "status {status}"),
            Self::TooLarge => f.write_str("response larger than the size cap"),
            Self::Body(err) => write!(f, "reading the body: {err}"),
            Self::Json(err) => write!(f, "not the expected JSON: {err}"),
            Self::Timeout => f.write_str("timed out"),
            Self::DiscoveryIssuer { document, named } => write!(
                f,
                "the issuer's discovery document {document} names the issuer {}, not PLANTS_JWT_ISSUER: \
                 set PLANTS_JWT_ISSUER exactly as the issuer names itself (its tokens' iss)",
                Quoted(named)
            ),
            Self::DiscoveryJwksUri { document, jwks_uri } => write!(
                f,
                "the issuer's discovery document {document} gives the jwks_uri {}, which is not an https URL \
                 (plain http only for an issuer on loopback): fix the issuer, or set PLANTS_JWT_JWKS_URL \
                 to its https JWKS URL",
                Quoted(jwks_uri)
            ),
            Self::Abandoned => f.write_str("the fetch was abandoned before it ended"),
            Self::At(url, err) => write!(f, "GET {url}: {err}"),
        }
    }
}

impl std::error::Error for FetchError {}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::http::HeaderValue;
    use lambda_http::tracing::field::{Field, Visit};
    use lambda_http::tracing::span::{Attributes, Id, Record};
    use lambda_http::tracing::subscriber::layer::{Context, SubscriberExt};
    use lambda_http::tracing::subscriber::util::SubscriberInitExt;
    use lambda_http::tracing::subscriber::{Layer, Registry};
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Every span opened while it is the subscriber: its name and the
    /// fields it was given a value for, as text.
    #[derive(Clone, Default)]
    struct Spans(Arc<Mutex<Vec<Opened>>>);

    type Recorded = BTreeMap<String, String>;

    struct Opened {
        id: Id,
        name: &'static str,
        fields: Recorded,
    }

    struct Fields<'a>(&'a mut BTreeMap<String, String>);

    impl Visit for Fields<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            self.0.insert(field.name().to_owned(), format!("{value:?}"));
        }

        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().to_owned(), value.to_owned());
        }
    }

    impl<S: tracing::Subscriber> Layer<S> for Spans {
        fn on_new_span(&self, attributes: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
            let mut fields = BTreeMap::new();
            attributes.record(&mut Fields(&mut fields));
            let name = attributes.metadata().name();
            let id = id.clone();
            self.0.lock().unwrap().push(Opened { id, name, fields });
        }

        fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
            let mut spans = self.0.lock().unwrap();
            let span = spans.iter_mut().rev().find(|span| span.id == *id).unwrap();
            values.record(&mut Fields(&mut span.fields));
        }
    }

    /// One GET of `url` under a subscriber that keeps its spans: the span's
    /// name and fields.
    async fn span_of_a_get(url: &str) -> (&'static str, Recorded) {
        let spans = Spans::default();
        let _default = Registry::default().with(spans.clone()).set_default();
        let url = FetchUrl::parse(url).unwrap();
        let fetcher = JwksFetcher::new(JwksSource::Url(url.clone()), None, Duration::from_secs(60), 1024);
        let _ = fetcher.get_json::<JwksDocument>(&url).await;
        let mut spans = spans.0.lock().unwrap();
        assert_eq!(spans.len(), 1, "one span per GET");
        let span = spans.remove(0);
        (span.name, span.fields)
    }

    fn fields(pairs: &[(&str, &str)]) -> Recorded {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[tokio::test]
    async fn a_get_answered_with_a_404_is_an_error_span_typed_by_its_status() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = [0; 1024];
            let _ = stream.read(&mut head).await.unwrap();
            let answer = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            stream.write_all(answer).await.unwrap();
        });
        let url = format!("http://127.0.0.1:{port}/keys/jwks.json");

        let (name, recorded) = span_of_a_get(&url).await;

        assert_eq!(name, "GET");
        let port = port.to_string();
        assert_eq!(
            recorded,
            fields(&[
                ("otel.kind", "client"),
                ("http.request.method", "GET"),
                ("url.full", &url),
                ("server.address", "127.0.0.1"),
                ("server.port", &port),
                ("aws.remote.service", "127.0.0.1"),
                ("aws.remote.operation", "GET /keys"),
                ("http.response.status_code", "404"),
                ("error.type", "404"),
                ("otel.status_code", "error"),
            ])
        );
    }

    #[tokio::test]
    async fn a_get_that_cannot_connect_is_a_connection_error_span_with_the_cause() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);

        let (_, mut recorded) = span_of_a_get(&format!("http://localhost:{port}/jwks.json")).await;

        let message = recorded.remove("otel.status_message").unwrap_or_default();
        assert!(
            !message.is_empty() && message.len() <= MAX_SPAN_MESSAGE_BYTES,
            "{message:?}"
        );
        assert_eq!(
            (
                &recorded["error.type"],
                &recorded["otel.status_code"],
                recorded.get("http.response.status_code"),
                &recorded["aws.remote.operation"],
            ),
            (
                &"ConnectionError".to_owned(),
                &"error".to_owned(),
                None,
                &"GET /jwks.json".to_owned()
            )
        );
    }

    #[test]
    fn cache_control_gives_max_age_and_no_cache_counts_as_zero() {
        let cases = [
            (vec!["max-age=300"], Some(300)),
            (vec!["public, max-age=60, must-revalidate"], Some(60)),
            (vec!["public", "Max-Age=\"90\""], Some(90)),
            (vec!["no-cache"], Some(0)),
            (vec!["max-age=600, no-store"], Some(0)),
            (vec!["max-age=soon"], None),
            (vec!["max-age=-1"], None),
            (vec!["public"], None),
            (vec![], None),
        ];
        for (values, expected) in cases {
            let mut headers = HeaderMap::new();
            for value in &values {
                headers.append(CACHE_CONTROL, HeaderValue::from_str(value).unwrap());
            }
            assert_eq!(max_age(&headers), expected.map(Duration::from_secs), "{values:?}");
        }
    }

    #[test]
    fn a_discovered_jwks_uri_must_be_https_unless_the_issuer_itself_is_on_loopback() {
        let https = FetchUrl::parse("https://issuer.example/.well-known/openid-configuration").unwrap();
        let loopback = FetchUrl::parse("http://127.0.0.1:8080/.well-known/openid-configuration").unwrap();
        let cases = [
            (&https, "https://issuer.example/jwks.json", true),
            (&https, "https://keys.other.example/jwks", true),
            (&https, "http://issuer.example/jwks.json", false),
            (
                &https,
                "http://127.0.0.1:9001/2018-06-01/runtime/invocation/next",
                false,
            ),
            (&https, "http://localhost/jwks.json", false),
            (&https, "/jwks.json", false),
            (&https, "", false),
            (&loopback, "http://127.0.0.1:8080/jwks.json", true),
            (&loopback, "http://localhost:8081/jwks.json", true),
            (&loopback, "https://issuer.example/jwks.json", true),
            (&loopback, "http://issuer.example/jwks.json", false),
        ];
        for (document, jwks_uri, allowed) in cases {
            assert_eq!(
                discovered_jwks_uri(document, jwks_uri).is_some(),
                allowed,
                "{jwks_uri} from {document}"
            );
        }
    }

    #[test]
    fn remote_text_in_a_message_is_quoted_escaped_and_cut() {
        assert_eq!(Quoted("http://a/\n\"x").to_string(), r#""http://a/\n\"x""#);
        let long = "x".repeat(121);
        assert_eq!(Quoted(&long).to_string(), format!("{:?}…", "x".repeat(120)));
        assert_eq!(Quoted(&long[..120]).to_string(), format!("{:?}", "x".repeat(120)));
    }

    #[test]
    fn only_https_urls_or_plain_http_on_loopback_may_be_fetched() {
        for good in [
            "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Example/.well-known/jwks.json",
            "https://tenant.eu.auth0.com/",
            "http://127.0.0.1:8080/jwks.json",
            "http://127.1.2.3/jwks.json",
            "http://localhost:9000/realms/dev",
            "http://[::1]:8080/jwks",
        ] {
            assert!(FetchUrl::parse(good).is_some(), "{good}");
        }
        for bad in [
            "http://issuer.example/jwks.json",
            "http://10.0.0.1/jwks.json",
            "http://localhost.attacker.example/",
            "https://user:pass@issuer.example/",
            "ftp://issuer.example/",
            "/jwks.json",
            "issuer.example",
            "https://",
            "",
        ] {
            assert!(FetchUrl::parse(bad).is_none(), "{bad}");
        }
    }
}
