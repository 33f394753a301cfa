//! The clients this process calls out with, built here and nowhere else:
//! the AWS SDK's configuration, built once at start, and an HTTP connector
//! for calls outside AWS, with the certificate authorities each trusts.
//!
//! Every AWS service endpoint chains to Amazon Trust Services, so the SDK's
//! connections trust those five roots, compiled in
//! (`amazon-trust-services.pem`), and nothing else: no other authority can
//! vouch for an AWS endpoint, and a cold start parses five certificates
//! rather than the platform's bundle of about 150 (docs/performance.md).
//! `AWS_CA_BUNDLE`, the variable the other AWS SDKs and the CLI read,
//! replaces them with a PEM file of the deployer's choosing: the platform's
//! bundle, a TLS-inspecting proxy's CA, or a local endpoint's.
//!
//! A host outside AWS (an OpenID issuer, a webhook) may use any public CA:
//! [`http_connector`] trusts the platform's roots, and `AWS_CA_BUNDLE`'s
//! certificates besides. Both go through the proxy that `HTTPS_PROXY`
//! (`HTTP_PROXY` for plain http, `ALL_PROXY` for either) names, except to
//! the hosts `NO_PROXY` lists, and validate certificates as the SDK does.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use aws_config::environment::{EnvironmentVariableCredentialsProvider, EnvironmentVariableRegionProvider};
use aws_config::{BehaviorVersion, SdkConfig};
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use aws_smithy_http_client::tls::{self, TlsContext, TrustStore};
use aws_smithy_http_client::{Builder, Connector, ConnectorBuilder, proxy::ProxyConfig};
use aws_smithy_runtime_api::client::http::{HttpConnectorSettings, SharedHttpConnector};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::env::CA_BUNDLE;

/// The roots of Amazon Trust Services, which AWS endpoints chain to.
const AMAZON_TRUST_SERVICES: &[u8] = include_bytes!("amazon-trust-services.pem");

/// The certificate authorities the SDK's connections trust.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Trust {
    /// Amazon Trust Services' roots, compiled in.
    AmazonTrustServices,
    /// The certificates of the file `AWS_CA_BUNDLE` names, read at start.
    #[non_exhaustive]
    Bundle {
        /// Where the certificates were read from.
        path: PathBuf,
        /// The file's contents.
        pem: Vec<u8>,
    },
}

/// Why `AWS_CA_BUNDLE` cannot be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum TrustError {
    /// The file cannot be read.
    Unreadable(PathBuf, std::io::Error),
    /// The file holds no PEM certificate.
    NoCertificate(PathBuf),
    /// A certificate in the file cannot be a trust anchor.
    NotAnAuthority(PathBuf),
}

impl fmt::Display for TrustError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unreadable(path, err) => {
                write!(
                    f,
                    "{CA_BUNDLE} names {}, which cannot be read: {err}",
                    path.display()
                )
            }
            Self::NoCertificate(path) => {
                write!(
                    f,
                    "{CA_BUNDLE} names {}, which holds no PEM certificate",
                    path.display()
                )
            }
            Self::NotAnAuthority(path) => write!(
                f,
                "{CA_BUNDLE} names {}, which holds a certificate that cannot be a trust anchor",
                path.display()
            ),
        }
    }
}

impl std::error::Error for TrustError {}

impl Trust {
    /// `AWS_CA_BUNDLE` if set (and not empty), else the built-in roots.
    pub fn from_env() -> Result<Self, TrustError> {
        match crate::env::ca_bundle() {
            Some(path) => Self::bundle(path.into()),
            None => Ok(Self::AmazonTrustServices),
        }
    }

    /// The file at `path`, checked now: the SDK parses the certificates
    /// again when it first connects and panics on any it cannot use.
    pub fn bundle(path: PathBuf) -> Result<Self, TrustError> {
        let pem = match std::fs::read(&path) {
            Ok(pem) => pem,
            Err(err) => return Err(TrustError::Unreadable(path, err)),
        };
        match authorities(&pem) {
            Ok(0) => Err(TrustError::NoCertificate(path)),
            Ok(_) => Ok(Self::Bundle { path, pem }),
            Err(()) => Err(TrustError::NotAnAuthority(path)),
        }
    }

    fn pem(&self) -> &[u8] {
        match self {
            Self::AmazonTrustServices => AMAZON_TRUST_SERVICES,
            Self::Bundle { pem, .. } => pem,
        }
    }
}

/// How many certificates `pem` holds, each usable as a trust anchor, read
/// as the SDK reads them.
fn authorities(pem: &[u8]) -> Result<usize, ()> {
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(pem) {
        roots.add(certificate.map_err(|_| ())?).map_err(|_| ())?;
    }
    Ok(roots.len())
}

/// The SDK's shared configuration, as `aws_config::load_defaults` builds
/// it, with an HTTP client that trusts `trust`.
pub async fn load(trust: &Trust) -> SdkConfig {
    let roots = TrustStore::empty().with_pem_certificate(trust.pem().to_vec());
    let http_client = Builder::new().build_with_connector_fn(move |settings, components| {
        connector(roots.clone(), settings, components, None)
    });
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).http_client(http_client);
    let env = crate::env::sdk_var;
    if credentials_in(env) {
        // Lambda hands the execution role's credentials over in these
        // variables, which the default chain reads first: naming their
        // provider skips building the rest of it (docs/performance.md, "Half
        // the CPU of a cold start"). Without them, the default chain.
        loader = loader.credentials_provider(EnvironmentVariableCredentialsProvider::new());
    }
    if region_in(env) {
        // Lambda sets AWS_REGION, which the default region chain reads
        // first too: naming its provider skips the rest of that chain.
        loader = loader.region(EnvironmentVariableRegionProvider::new());
    }
    loader.load().await
}

/// An HTTP connector for calls outside AWS: an OpenID issuer's keys, a
/// webhook. It trusts the platform's roots, and with `AWS_CA_BUNDLE` set
/// that file's certificates too (an issuer on a private CA, a
/// TLS-inspecting proxy); it goes through the proxy the variables name, as
/// the SDK's client does. Building it reads and parses the platform's
/// roots (about 150 certificates): build it during init, and only when the
/// function calls out.
///
/// Send it requests with
/// [`HttpConnector::call`](aws_smithy_runtime_api::client::http::HttpConnector::call);
/// clones share its connections.
pub fn http_connector(trust: &Trust) -> SharedHttpConnector {
    let roots = match trust {
        Trust::AmazonTrustServices => TrustStore::default(),
        Trust::Bundle { pem, .. } => TrustStore::default().with_pem_certificate(pem.clone()),
    };
    SharedHttpConnector::new(connector(roots, None, None, Some(OUTBOUND_IDLE)))
}

/// How long a connection outside AWS stays pooled, idle: well under the
/// minute or more after which servers close idle connections, so that a
/// call after a quiet spell does not meet one closed under it.
const OUTBOUND_IDLE: Duration = Duration::from_secs(30);

/// The connector the SDK's default client builds (aws-smithy-runtime's
/// `default_https_client`: rustls on aws-lc-rs, the proxy variables), with
/// `roots` to trust. Every connection this process opens, except the
/// Runtime API's, starts here.
fn connector(
    roots: TrustStore,
    settings: Option<&HttpConnectorSettings>,
    components: Option<&RuntimeComponents>,
    idle: Option<Duration>,
) -> Connector {
    // Only the additional server names of a context can fail to build, and
    // it has none; the SDK's own default context is the fallback.
    let context = TlsContext::builder()
        .with_trust_store(roots)
        .build()
        .unwrap_or_default();
    let mut connector = ConnectorBuilder::default()
        .tls_provider(tls::Provider::Rustls(CryptoMode::AwsLc))
        .tls_context(context);
    connector.set_connector_settings(settings.cloned());
    if let Some(components) = components {
        connector.set_sleep_impl(components.sleep_impl());
    }
    connector.set_proxy_config(Some(ProxyConfig::from_env()));
    if let Some(idle) = idle {
        connector.set_pool_idle_timeout(Some(Some(idle)));
    }
    connector.build()
}

/// What the SDK's environment credentials provider needs: both keys, not
/// blank.
fn credentials_in(env: impl Fn(&str) -> Option<String>) -> bool {
    ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
        .iter()
        .all(|name| env(name).is_some_and(|value| !value.trim().is_empty()))
}

/// What the SDK's environment region provider reads, in its order: the
/// first of the two that is set, which must not be blank.
fn region_in(env: impl Fn(&str) -> Option<String>) -> bool {
    env("AWS_REGION")
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .is_some_and(|region| !region.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    type Environment<'a> = &'a [(&'a str, &'a str)];

    fn environment<'a>(pairs: Environment<'a>) -> impl Fn(&str) -> Option<String> + 'a {
        |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    #[test]
    fn the_environment_providers_are_named_only_when_they_would_answer() {
        let cases: &[(Environment, bool, bool)] = &[
            // (environment, credentials from it, region from it)
            (
                &[
                    ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
                    ("AWS_SECRET_ACCESS_KEY", "secret"),
                    ("AWS_REGION", "eu-west-1"),
                ],
                true,
                true,
            ),
            (&[("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")], false, false),
            (
                &[
                    ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
                    ("AWS_SECRET_ACCESS_KEY", " "),
                ],
                false,
                false,
            ),
            (&[("AWS_DEFAULT_REGION", "us-east-2")], false, true),
            // AWS_REGION set, even blank, is what the provider reads.
            (
                &[("AWS_REGION", ""), ("AWS_DEFAULT_REGION", "us-east-2")],
                false,
                false,
            ),
            (&[], false, false),
        ];
        for (pairs, credentials, region) in cases {
            assert_eq!(credentials_in(environment(pairs)), *credentials, "{pairs:?}");
            assert_eq!(region_in(environment(pairs)), *region, "{pairs:?}");
        }
    }

    #[test]
    fn the_built_in_roots_are_amazon_trust_services_five_unchanged() {
        let fingerprints: Vec<String> = CertificateDer::pem_slice_iter(AMAZON_TRUST_SERVICES)
            .map(|certificate| hex::encode_upper(Sha256::digest(certificate.unwrap().as_ref())))
            .collect();
        assert_eq!(
            fingerprints,
            [
                // Amazon Root CA 1 to 4, Starfield Services Root Certificate Authority - G2.
                "8ECDE6884F3D87B1125BA31AC3FCB13D7016DE7F57CC904FE1CB97C6AE98196E",
                "1BA5B2AA8C65401A82960118F80BEC4F62304D83CEC4713A19C39C011EA46DB4",
                "18CE6CFE7BF14E60B2E347B8DFE868CB31D02EBB3ADA271569F50343B46DB3A4",
                "E35D28419ED02025CFA69038CD623962458DA5C695FBDEA3C22B0BFB25897092",
                "568D6905A2C88708A4B3025190EDCFEDB1974A606A13C6E5290FCB2AE63EDAB5",
            ]
        );
        assert_eq!(authorities(AMAZON_TRUST_SERVICES), Ok(5));
    }

    fn written(name: &str, contents: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!("lambda-host-{}-{name}", std::process::id()));
        std::fs::write(&path, contents).unwrap();
        path
    }

    #[test]
    fn a_bundle_of_certificates_replaces_the_built_in_roots() {
        let path = written("bundle.pem", AMAZON_TRUST_SERVICES);
        let trust = Trust::bundle(path.clone()).unwrap();
        assert_eq!(trust.pem(), AMAZON_TRUST_SERVICES);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_bundle_that_cannot_serve_refuses_to_start_naming_the_variable_and_file() {
        let missing = std::env::temp_dir().join("lambda-host-no-such-bundle.pem");
        let err = Trust::bundle(missing.clone()).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "AWS_CA_BUNDLE names {}, which cannot be read: ",
                missing.display()
            )),
            "{err}"
        );

        let empty = written("empty.pem", b"# no certificate here\n");
        assert_eq!(
            Trust::bundle(empty.clone()).unwrap_err().to_string(),
            format!(
                "AWS_CA_BUNDLE names {}, which holds no PEM certificate",
                empty.display()
            )
        );
        std::fs::remove_file(empty).unwrap();

        let garbage = written(
            "garbage.pem",
            b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
        );
        assert_eq!(
            Trust::bundle(garbage.clone()).unwrap_err().to_string(),
            format!(
                "AWS_CA_BUNDLE names {}, which holds a certificate that cannot be a trust anchor",
                garbage.display()
            )
        );
        std::fs::remove_file(garbage).unwrap();
    }
}
