//! Fetching the issuer's keys over HTTP: which URLs may be fetched, the
//! client, and the capped GETs of the discovery document and the JWKS.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use lambda_http::http::header::{ACCEPT, CACHE_CONTROL, CONTENT_LENGTH, HeaderMap, USER_AGENT};
use lambda_http::http::{Request, StatusCode, Uri};
use lambda_http::tracing;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::jwks::{JwksDocument, VerifyingKey};
use crate::error::ErrorChain;

const USER_AGENT_VALUE: &str = concat!("plant-store/", env!("CARGO_PKG_VERSION"));

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

/// The HTTP client could not be set up (a broken TLS configuration).
#[derive(Debug)]
pub struct ClientError(rustls::Error);

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot set up TLS for fetching the issuer's keys: {}", self.0)
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
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
    client: HttpClient,
    timeout: Duration,
    max_bytes: usize,
}

impl JwksFetcher {
    pub(super) fn new(source: JwksSource, timeout: Duration, max_bytes: usize) -> Result<Self, ClientError> {
        Ok(Self {
            source,
            client: http_client(timeout)?,
            timeout,
            max_bytes,
        })
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
        let exchange = async {
            let request = Request::get(url.0.clone())
                .header(ACCEPT, "application/json")
                .header(USER_AGENT, USER_AGENT_VALUE)
                .body(Empty::<Bytes>::new())
                .map_err(|_| FetchError::Request)?;
            // On the request path of a sampled invocation, a CLIENT span.
            let response = lambda_host::trace::remote_call(&url.0, self.client.request(request))
                .await
                .map_err(FetchError::Transport)?;
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
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(outcome) => outcome.map_err(|err| err.at(url)),
            Err(_) => Err(FetchError::Timeout.at(url)),
        }
    }
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
    Transport(hyper_util::client::legacy::Error),
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

type HttpClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// hyper with rustls on aws-lc-rs and the platform's CA certificates, as
/// the AWS SDK does it. Plain http is allowed by the connector because
/// `FetchUrl` only lets it through for loopback hosts.
fn http_client(timeout: Duration) -> Result<HttpClient, ClientError> {
    let native = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(native.certs);
    if added == 0 {
        tracing::warn!("no CA certificates found: https fetches of the issuer's keys will fail");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(ClientError)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(timeout));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(https))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::http::HeaderValue;

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
