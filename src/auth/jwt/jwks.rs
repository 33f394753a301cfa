//! Which keys of an issuer's JWKS may verify tokens: RSA of 2048 bits or
//! more for RS256, P-256 for ES256, signature keys only, never a symmetric one.

use std::collections::HashMap;
use std::sync::Arc;

use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED, ParsedPublicKey, RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents,
};
use jsonwebtoken::{Algorithm, DecodingKey, DecodingKeyKind};
use lambda_http::tracing;
use serde::Deserialize;

/// A key from the JWKS and the one algorithm it may verify.
pub(super) struct VerifyingKey {
    pub(super) algorithm: Algorithm,
    pub(super) key: Arc<PublicKey>,
}

/// An issuer's key, parsed once for every check it verifies: per check,
/// jsonwebtoken would build aws-lc's key from the JWK's components again
/// (and its Montgomery context with it). Verified with the parameters
/// jsonwebtoken's aws-lc backend uses: RS256 as PKCS#1 v1.5 with SHA-256
/// on 2048 to 8192 bits, ES256 on P-256 with fixed-length signatures.
pub(super) struct PublicKey(Option<ParsedPublicKey>);

impl PublicKey {
    /// `key`'s parse, `None` when aws-lc refuses it.
    fn parse(algorithm: Algorithm, key: &DecodingKey) -> Self {
        let parsed = match (algorithm, key.kind()) {
            (Algorithm::RS256, DecodingKeyKind::RsaModulusExponent { n, e }) => {
                RsaPublicKeyComponents { n, e }
                    .to_parsed_public_key(&RSA_PKCS1_2048_8192_SHA256)
                    .ok()
            }
            (Algorithm::ES256, DecodingKeyKind::SecretOrDer(point)) => {
                ParsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point).ok()
            }
            _ => None,
        };
        Self(parsed)
    }

    /// Whether `signature` is this key's signature of `message`. A key
    /// aws-lc refused verifies nothing, as when it was parsed per check.
    pub(super) fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        self.0
            .as_ref()
            .is_some_and(|key| key.verify_sig(message, signature).is_ok())
    }
}

/// A JWKS. Each key is read on its own, so that one key of a type we do
/// not use (or do not understand) does not spoil the others.
#[derive(Deserialize)]
pub(super) struct JwksDocument {
    keys: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct Jwk {
    kty: String,
    kid: Option<String>,
    #[serde(rename = "use")]
    usage: Option<String>,
    key_ops: Option<Vec<String>>,
    alg: Option<String>,
    n: Option<String>,
    e: Option<String>,
    crv: Option<String>,
    x: Option<String>,
    y: Option<String>,
}

impl JwksDocument {
    pub(super) fn usable_keys(self) -> HashMap<String, Vec<VerifyingKey>> {
        let mut by_kid: HashMap<String, Vec<VerifyingKey>> = HashMap::new();
        for value in self.keys {
            match serde_json::from_value::<Jwk>(value)
                .map_err(|_| "malformed")
                .and_then(Jwk::usable)
            {
                Ok((kid, key)) => by_kid.entry(kid).or_default().push(key),
                Err(reason) => tracing::debug!(reason, "JWKS key skipped"),
            }
        }
        by_kid
    }
}

impl Jwk {
    fn usable(self) -> Result<(String, VerifyingKey), &'static str> {
        let kid = self.kid.ok_or("no kid")?;
        if self.usage.as_deref().is_some_and(|usage| usage != "sig") {
            return Err("not a signature key (use)");
        }
        if self
            .key_ops
            .is_some_and(|ops| !ops.iter().any(|op| op == "verify"))
        {
            return Err("not a verification key (key_ops)");
        }
        let (algorithm, key) = match (self.kty.as_str(), self.crv.as_deref()) {
            ("RSA", _) => {
                let (Some(n), Some(e)) = (&self.n, &self.e) else {
                    return Err("RSA key without n or e");
                };
                let key = DecodingKey::from_rsa_components(n, e).map_err(|_| "RSA key not base64url")?;
                if let DecodingKeyKind::RsaModulusExponent { n, .. } = key.kind() {
                    let significant = n.iter().skip_while(|&&byte| byte == 0).count();
                    if significant < 2048 / 8 {
                        return Err("RSA key shorter than 2048 bits");
                    }
                }
                (Algorithm::RS256, key)
            }
            ("EC", Some("P-256")) => {
                let (Some(x), Some(y)) = (&self.x, &self.y) else {
                    return Err("EC key without x or y");
                };
                let key = DecodingKey::from_ec_components(x, y).map_err(|_| "EC key not base64url")?;
                if key.try_get_as_bytes().map_or(true, |point| point.len() != 65) {
                    return Err("EC key is not a P-256 point");
                }
                (Algorithm::ES256, key)
            }
            ("EC", _) => return Err("EC key on a curve other than P-256"),
            ("oct", _) => return Err("symmetric key (oct): never used"),
            _ => return Err("unsupported key type"),
        };
        if self
            .alg
            .as_deref()
            .is_some_and(|alg| alg != algorithm_name(algorithm))
        {
            return Err("the key's alg is not one we accept");
        }
        let key = Arc::new(PublicKey::parse(algorithm, &key));
        Ok((kid, VerifyingKey { algorithm, key }))
    }
}

fn algorithm_name(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::RS256 => "RS256",
        Algorithm::ES256 => "ES256",
        _ => "",
    }
}

/// Its helpers also build the JWKS entries that the tests of `keys` and of
/// the verifier use.
#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use aws_lc_rs::rsa::KeySize;
    use aws_lc_rs::signature::{
        ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, RsaKeyPair, RsaPublicKeyComponents,
    };
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use serde_json::{Value, json};

    pub(in crate::auth::jwt) fn b64(bytes: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(bytes)
    }

    pub(in crate::auth::jwt) fn rsa_jwk(key: &RsaKeyPair, kid: &str) -> Value {
        let public = RsaPublicKeyComponents::<Vec<u8>>::from(key.public_key());
        json!({ "kty": "RSA", "kid": kid, "use": "sig", "n": b64(&public.n), "e": b64(&public.e) })
    }

    pub(in crate::auth::jwt) fn ec_jwk(key: &EcdsaKeyPair, kid: &str) -> Value {
        let point = key.public_key().as_ref();
        json!({ "kty": "EC", "kid": kid, "crv": "P-256", "x": b64(&point[1..33]), "y": b64(&point[33..]) })
    }

    pub(in crate::auth::jwt) fn keys(jwks: Value) -> HashMap<String, Vec<VerifyingKey>> {
        serde_json::from_value::<JwksDocument>(jwks)
            .unwrap()
            .usable_keys()
    }

    #[test]
    fn jwks_keys_we_must_not_use_are_skipped_and_the_rest_kept() {
        let rsa = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let weak = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let ec = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let with = |mut jwk: Value, field: &str, value: Value| {
            jwk[field] = value;
            jwk
        };
        let mut short = rsa_jwk(&weak, "short");
        // 1024 bits: the first half of a 2048-bit modulus.
        let public = RsaPublicKeyComponents::<Vec<u8>>::from(weak.public_key());
        short["n"] = json!(b64(&public.n[..128]));
        let jwks = keys(json!({ "keys": [
            rsa_jwk(&rsa, "rsa"),
            with(rsa_jwk(&rsa, "rsa-alg"), "alg", json!("RS256")),
            ec_jwk(&ec, "ec"),
            with(ec_jwk(&ec, "ec-alg"), "alg", json!("ES256")),
            { "kty": "oct", "kid": "oct", "k": "c2VjcmV0", "alg": "HS256" },
            { "kty": "oct", "kid": "oct-without-alg", "k": "c2VjcmV0" },
            with(rsa_jwk(&rsa, "enc"), "use", json!("enc")),
            with(rsa_jwk(&rsa, "ops"), "key_ops", json!(["encrypt"])),
            with(rsa_jwk(&rsa, "rs512"), "alg", json!("RS512")),
            with(rsa_jwk(&rsa, "ps256"), "alg", json!("PS256")),
            with(ec_jwk(&ec, "ec-rs256"), "alg", json!("RS256")),
            with(ec_jwk(&ec, "p384"), "crv", json!("P-384")),
            with(ec_jwk(&ec, "short-x"), "x", json!("AAAA")),
            with(rsa_jwk(&rsa, "no-e"), "e", Value::Null),
            with(rsa_jwk(&rsa, "bad-n"), "n", json!("not base64url!")),
            { "kty": "OKP", "kid": "okp", "crv": "Ed25519", "x": "AAAA" },
            { "kid": "no-kty" },
            "not an object",
            short,
            with(rsa_jwk(&rsa, "no-kid"), "kid", Value::Null),
        ]}));

        let mut kept: Vec<(&str, Algorithm)> = jwks
            .iter()
            .flat_map(|(kid, keys)| keys.iter().map(move |key| (kid.as_str(), key.algorithm)))
            .collect();
        kept.sort_by_key(|(kid, _)| *kid);
        assert_eq!(
            kept,
            [
                ("ec", Algorithm::ES256),
                ("ec-alg", Algorithm::ES256),
                ("rsa", Algorithm::RS256),
                ("rsa-alg", Algorithm::RS256),
            ]
        );
    }
}
