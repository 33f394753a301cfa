//! The built function fetches the issuer's keys as the SDK reaches
//! DynamoDB: trusting `AWS_CA_BUNDLE`'s certificates (besides the
//! platform's roots), through `HTTPS_PROXY`, and straight to the hosts
//! `NO_PROXY` lists. The issuer serves HTTPS on loopback with a certificate
//! for `localhost` from a certificate authority made when the tests start,
//! which no platform trusts; the proxy is a CONNECT proxy on loopback that
//! writes down where each tunnel went.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};
use base64::engine::general_purpose::STANDARD;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

use super::*;
use crate::helpers::function;
use crate::runtime_fake::FakeRuntimeApi;

// ---------------------------------------------------------------------------
// A certificate authority and a server certificate, in DER.

fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let length = content.len();
    let mut out = vec![tag];
    match u8::try_from(length) {
        Ok(short) if short < 0x80 => out.push(short),
        Ok(byte) => out.extend([0x81, byte]),
        Err(_) => out.extend([0x82, (length >> 8) as u8, length as u8]),
    }
    out.extend_from_slice(content);
    out
}

fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    der(0x30, &parts.concat())
}

const ECDSA_WITH_SHA256: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const EC_PUBLIC_KEY: &[u8] = &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const PRIME256V1: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const COMMON_NAME: &[u8] = &[0x06, 0x03, 0x55, 0x04, 0x03];
const BASIC_CONSTRAINTS: &[u8] = &[0x06, 0x03, 0x55, 0x1d, 0x13];
const KEY_USAGE: &[u8] = &[0x06, 0x03, 0x55, 0x1d, 0x0f];
const SUBJECT_ALT_NAME: &[u8] = &[0x06, 0x03, 0x55, 0x1d, 0x11];
const EXTENDED_KEY_USAGE: &[u8] = &[0x06, 0x03, 0x55, 0x1d, 0x25];
const SERVER_AUTH: &[u8] = &[0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];
const CRITICAL: &[u8] = &[0x01, 0x01, 0xff];

fn name(common_name: &str) -> Vec<u8> {
    let attribute = sequence(&[COMMON_NAME, &der(0x0c, common_name.as_bytes())]);
    sequence(&[&der(0x31, &attribute)])
}

fn extension(id: &[u8], critical: bool, value: &[u8]) -> Vec<u8> {
    let critical: &[u8] = if critical { CRITICAL } else { &[] };
    sequence(&[id, critical, &der(0x04, value)])
}

/// A v3 certificate of `subject`'s key, signed by `issuer`'s.
fn certificate(
    serial: u8,
    subject: (&str, &EcdsaKeyPair),
    issuer: (&str, &EcdsaKeyPair),
    extensions: &[Vec<u8>],
) -> Vec<u8> {
    let algorithm = sequence(&[ECDSA_WITH_SHA256]);
    let mut point = vec![0];
    point.extend_from_slice(subject.1.public_key().as_ref());
    let key = sequence(&[&sequence(&[EC_PUBLIC_KEY, PRIME256V1]), &der(0x03, &point)]);
    let validity = sequence(&[&der(0x17, b"200101000000Z"), &der(0x18, b"21000101000000Z")]);
    let tbs = sequence(&[
        &der(0xa0, &der(0x02, &[0x02])),
        &der(0x02, &[serial]),
        &algorithm,
        &name(issuer.0),
        &validity,
        &name(subject.0),
        &key,
        &der(
            0xa3,
            &sequence(&extensions.iter().map(Vec::as_slice).collect::<Vec<_>>()),
        ),
    ]);
    let signature = issuer.1.sign(&SystemRandom::new(), &tbs).expect("a signature");
    let mut bits = vec![0];
    bits.extend_from_slice(signature.as_ref());
    sequence(&[&tbs, &algorithm, &der(0x03, &bits)])
}

fn key_pair() -> (EcdsaKeyPair, Vec<u8>) {
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &SystemRandom::new())
        .expect("a P-256 key");
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).expect("the key");
    (key, pkcs8.as_ref().to_vec())
}

/// A test certificate authority's certificate (PEM, in a file for
/// `AWS_CA_BUNDLE`), and the TLS configuration of a server for
/// `localhost` whose certificate it signed.
struct TestAuthority {
    bundle: PathBuf,
    server: Arc<ServerConfig>,
}

fn authority() -> &'static TestAuthority {
    static AUTHORITY: OnceLock<TestAuthority> = OnceLock::new();
    AUTHORITY.get_or_init(|| {
        let (ca_key, _) = key_pair();
        let ca_name = "plant-store test authority";
        let ca = certificate(
            1,
            (ca_name, &ca_key),
            (ca_name, &ca_key),
            &[
                extension(BASIC_CONSTRAINTS, true, &sequence(&[&[0x01, 0x01, 0xff]])),
                // keyCertSign and cRLSign.
                extension(KEY_USAGE, true, &[0x03, 0x02, 0x01, 0x06]),
            ],
        );
        let (server_key, server_pkcs8) = key_pair();
        let server_certificate = certificate(
            2,
            ("localhost", &server_key),
            (ca_name, &ca_key),
            &[
                extension(SUBJECT_ALT_NAME, false, &sequence(&[&der(0x82, b"localhost")])),
                extension(EXTENDED_KEY_USAGE, false, &sequence(&[SERVER_AUTH])),
            ],
        );

        let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
        let encoded = STANDARD.encode(&ca);
        for line in encoded.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
        let bundle = std::env::temp_dir().join(format!("plant-store-{}-test-ca.pem", std::process::id()));
        std::fs::write(&bundle, pem).expect("the bundle written");

        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let server = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(server_certificate)],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_pkcs8)),
            )
            .expect("the server's certificate and key");
        TestAuthority {
            bundle,
            server: Arc::new(server),
        }
    })
}

// ---------------------------------------------------------------------------
// The issuer over HTTPS, and the proxy.

/// Reads up to the end of an HTTP head.
fn read_head(stream: &mut impl Read) -> io::Result<String> {
    let mut head = Vec::new();
    let mut buffer = [0; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        match stream.read(&mut buffer)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            read => head.extend_from_slice(&buffer[..read]),
        }
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// Serves `standard_jwks()` at `https://localhost:<port>/jwks.json`, one
/// response per connection, counting the requests that came through TLS.
struct HttpsIssuer {
    jwks_url: String,
    requests: Arc<AtomicUsize>,
}

impl HttpsIssuer {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("an address").port();
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let counted = Arc::clone(&counted);
                std::thread::spawn(move || Self::answer(stream, &counted));
            }
        });
        Self {
            jwks_url: format!("https://localhost:{port}/jwks.json"),
            requests,
        }
    }

    fn answer(stream: TcpStream, requests: &AtomicUsize) -> io::Result<()> {
        let connection = ServerConnection::new(Arc::clone(&authority().server)).map_err(io::Error::other)?;
        let mut tls = StreamOwned::new(connection, stream);
        let head = read_head(&mut tls)?;
        requests.fetch_add(1, Ordering::SeqCst);
        let (status, body) = if head.starts_with("GET /jwks.json ") {
            ("200 OK", standard_jwks())
        } else {
            ("404 Not Found", String::new())
        };
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        tls.write_all(response.as_bytes())?;
        tls.conn.send_close_notify();
        tls.flush()
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// An HTTP proxy that only tunnels (`CONNECT`), to loopback whatever the
/// host asked for, and writes down each `CONNECT` target.
struct ConnectProxy {
    url: String,
    targets: Arc<Mutex<Vec<String>>>,
}

impl ConnectProxy {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let targets = Arc::<Mutex<Vec<String>>>::default();
        let written = Arc::clone(&targets);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let written = Arc::clone(&written);
                std::thread::spawn(move || Self::tunnel(stream, &written));
            }
        });
        Self { url, targets }
    }

    fn tunnel(mut client: TcpStream, targets: &Mutex<Vec<String>>) -> io::Result<()> {
        // The client sends nothing more before the proxy's answer.
        let head = read_head(&mut client)?;
        let target = head
            .strip_prefix("CONNECT ")
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_default()
            .to_owned();
        targets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(target.clone());
        let port = target.rsplit_once(':').map_or("", |(_, port)| port);
        let Ok(port) = port.parse::<u16>() else {
            return client.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        };
        let mut upstream = TcpStream::connect(("127.0.0.1", port))?;
        client.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")?;
        let (mut from_client, mut to_upstream) = (client.try_clone()?, upstream.try_clone()?);
        std::thread::spawn(move || io::copy(&mut from_client, &mut to_upstream));
        io::copy(&mut upstream, &mut client)?;
        Ok(())
    }

    fn targets(&self) -> Vec<String> {
        self.targets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

// ---------------------------------------------------------------------------
// The built function.

/// Runs the built function with JWTs from `issuer` on (its JWKS URL
/// configured) and `env` added, under a stand-in Runtime API that has no
/// invocation for it, until it exits: what it printed. What the issuer
/// served, it served during init.
async fn run_the_function(issuer: &HttpsIssuer, env: &[(&str, &str)]) -> String {
    let api = FakeRuntimeApi::start(Vec::new());
    let mut command = function(&api.address, "http://127.0.0.1:9");
    command
        .envs([
            ("PLANTS_JWT_ISSUER", ISSUER),
            ("PLANTS_JWT_AUDIENCE", AUDIENCE),
            ("PLANTS_JWT_JWKS_URL", issuer.jwks_url.as_str()),
        ])
        .envs(env.iter().copied());
    let output = tokio::task::spawn_blocking(move || command.output().expect("the function binary runs"))
        .await
        .expect("the function's run");
    assert!(!api.nexts().is_empty(), "it never asked for an invocation");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn bundle() -> &'static str {
    authority().bundle.to_str().expect("a UTF-8 temporary path")
}

const NOT_FETCHED: &str = "could not fetch the issuer's keys during init";

#[tokio::test]
async fn the_keys_are_fetched_from_an_issuer_whose_authority_only_aws_ca_bundle_names() {
    let issuer = HttpsIssuer::start();

    let without = run_the_function(&issuer, &[]).await;
    assert_eq!(
        issuer.requests(),
        0,
        "a handshake with an unknown authority: {without}"
    );
    assert!(without.contains(NOT_FETCHED), "{without}");

    let with = run_the_function(&issuer, &[("AWS_CA_BUNDLE", bundle())]).await;
    assert_eq!(issuer.requests(), 1, "{with}");
    assert!(!with.contains(NOT_FETCHED), "{with}");
}

#[tokio::test]
async fn the_keys_are_fetched_through_https_proxy() {
    let issuer = HttpsIssuer::start();
    let proxy = ConnectProxy::start();

    let printed = run_the_function(
        &issuer,
        &[("AWS_CA_BUNDLE", bundle()), ("HTTPS_PROXY", proxy.url.as_str())],
    )
    .await;

    let port = issuer
        .jwks_url
        .split(':')
        .nth(2)
        .and_then(|rest| rest.split('/').next());
    assert_eq!(
        proxy.targets(),
        [format!("localhost:{}", port.expect("the issuer's port"))],
        "{printed}"
    );
    assert_eq!(issuer.requests(), 1, "{printed}");
    assert!(!printed.contains(NOT_FETCHED), "{printed}");
}

#[tokio::test]
async fn the_keys_are_fetched_straight_from_a_host_no_proxy_lists() {
    let issuer = HttpsIssuer::start();
    let proxy = ConnectProxy::start();

    let printed = run_the_function(
        &issuer,
        &[
            ("AWS_CA_BUNDLE", bundle()),
            ("HTTPS_PROXY", proxy.url.as_str()),
            ("NO_PROXY", "example.com,localhost"),
        ],
    )
    .await;

    assert_eq!(proxy.targets(), Vec::<String>::new(), "{printed}");
    assert_eq!(issuer.requests(), 1, "{printed}");
    assert!(!printed.contains(NOT_FETCHED), "{printed}");
}
