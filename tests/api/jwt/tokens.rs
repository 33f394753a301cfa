//! Every kind of token, and malformed bearer values, with their documented answers.

use super::*;

#[tokio::test]
async fn every_kind_of_token_gets_its_documented_answer() {
    use Expect::{Created, InsufficientScope, InvalidToken, NoCredentials};
    let server = JwksServer::start(standard_jwks()).await;
    let app = app(&server, patient()).await;
    let now = now();
    let rsa_public_key = keys().rsa.public_key().as_ref().to_vec();
    // A good RS256 access token with one header parameter or claim changed
    // (`Value::Null` removes it).
    let header = |name: &str, value: Value| Jwt::rs256().header(name, value);
    let claim = |name: &str, value: Value| Jwt::rs256().claim(name, value);

    let accepted = vec![
        ("a good RS256 token", Jwt::rs256()),
        ("a good ES256 token", Jwt::es256()),
        ("typ JWT", header("typ", json!("JWT"))),
        (
            "typ application/at+jwt",
            header("typ", json!("application/at+jwt")),
        ),
        ("no typ", header("typ", Value::Null)),
        ("aud among others", claim("aud", json!(["other", AUDIENCE]))),
        (
            "no aud but a matching client_id (Cognito)",
            claim("aud", Value::Null)
                .claim("client_id", json!(CLIENT_ID))
                .claim("token_use", json!("access")),
        ),
        (
            "the scope in scp as an array (Okta)",
            claim("scope", Value::Null).claim("scp", json!(["openid", SCOPE])),
        ),
        (
            "the scope in scp as a string (Entra ID)",
            claim("scope", Value::Null).claim("scp", json!(format!("read {SCOPE}"))),
        ),
        ("expired, but within the leeway", claim("exp", json!(now - 10))),
        ("nbf within the leeway", claim("nbf", json!(now + 10))),
        ("iat within the leeway", claim("iat", json!(now + 10))),
    ];
    let invalid = vec![
        ("alg none", header("alg", json!("none")).signed(Signing::Unsigned)),
        ("alg noNE", header("alg", json!("noNE")).signed(Signing::Unsigned)),
        ("alg none with an RS256 signature", header("alg", json!("none"))),
        (
            "HS256 signed with the RSA public key as its secret",
            header("alg", json!("HS256")).signed(Signing::Hs256(rsa_public_key)),
        ),
        (
            "HS256 signed with the oct key of the JWKS",
            header("alg", json!("HS256"))
                .header("kid", json!("oct-1"))
                .signed(Signing::Hs256(OCT_SECRET.to_vec())),
        ),
        (
            "RS512, which is not allowed",
            header("alg", json!("RS512")).signed(Signing::Rs512(&keys().rsa)),
        ),
        (
            "ES256 under the kid of an RSA key",
            Jwt::es256().header("kid", json!("rsa-1")),
        ),
        ("RS256 under the kid of an EC key", header("kid", json!("ec-1"))),
        ("no kid", header("kid", Value::Null)),
        (
            "signed by another key",
            Jwt::rs256().signed(Signing::Rs256(&keys().rsa_next)),
        ),
        ("claims changed after signing", Jwt::rs256().tampered()),
        ("a critical header parameter", header("crit", json!(["exp"]))),
        ("expired", claim("exp", json!(now - 120))),
        ("nbf in the future", claim("nbf", json!(now + 120))),
        (
            "iat in the future beyond the leeway",
            claim("iat", json!(now + 120)),
        ),
        ("no exp", claim("exp", Value::Null)),
        ("exp as a string", claim("exp", json!((now + 300).to_string()))),
        ("nbf as a string", claim("nbf", json!(now.to_string()))),
        ("iat as a string", claim("iat", json!(now.to_string()))),
        (
            "a wrong issuer",
            claim("iss", json!("https://issuer.example/other")),
        ),
        (
            "the issuer with a trailing slash",
            claim("iss", json!(format!("{ISSUER}/"))),
        ),
        ("iss as an array", claim("iss", json!([ISSUER]))),
        ("no iss", claim("iss", Value::Null)),
        ("a wrong audience", claim("aud", json!("https://other.example"))),
        ("an empty aud array", claim("aud", json!([]))),
        (
            "a wrong aud beside a matching client_id",
            claim("aud", json!("https://other.example")).claim("client_id", json!(CLIENT_ID)),
        ),
        (
            "no aud and a wrong client_id",
            claim("aud", Value::Null).claim("client_id", json!("other-client")),
        ),
        ("neither aud nor client_id", claim("aud", Value::Null)),
        (
            "an ID token (Cognito: token_use id, aud is the client id)",
            claim("aud", json!(CLIENT_ID))
                .claim("token_use", json!("id"))
                .claim("scope", Value::Null),
        ),
        (
            "a typ that is not an access token's",
            header("typ", json!("dpop+jwt")),
        ),
    ];
    let lacking_the_scope = vec![
        ("no scope at all", claim("scope", Value::Null)),
        ("another scope", claim("scope", json!("openid plants:read"))),
        (
            "a scope that only starts with the required one",
            claim("scope", json!("plants:write-all")),
        ),
        ("the scope in another case", claim("scope", json!("PLANTS:WRITE"))),
    ];

    let cases = [
        (Created, accepted),
        (InvalidToken, invalid),
        (InsufficientScope, lacking_the_scope),
    ]
    .into_iter()
    .flat_map(|(expect, cases)| cases.into_iter().map(move |(case, jwt)| (case, jwt, expect)));
    let mut ids = 1..;
    for ((case, jwt, expect), id) in cases.zip(&mut ids) {
        let response = app.send(request(&jwt.encode(), id)).await;
        assert_outcome(&app, &response, id, expect, case).await;
    }
    // RFC 6750 §2.3's `access_token` query parameter, which we do not read.
    let id = ids.next().expect("an id");
    let in_the_query = Event::load("create-http-api.json")
        .body(&json!({ "id": id, "name": format!("plant {id}") }).to_string())
        .header("authorization", None)
        .query("access_token", &Jwt::rs256().encode())
        .request();
    let response = app.send(in_the_query).await;
    let case = "a good token in the query string instead of the header";
    assert_outcome(&app, &response, id, NoCredentials, case).await;
    assert_eq!(
        server.fetches(),
        1,
        "the keys are fetched once, and no refused token triggers a fetch"
    );
}

#[tokio::test]
async fn malformed_bearer_values_are_invalid_tokens_without_a_fetch() {
    let server = JwksServer::start(standard_jwks()).await;
    let app = app(&server, patient()).await;
    let good = Jwt::rs256().encode();
    let (header, rest) = good.split_once('.').expect("a JWT");
    let payload = rest.split_once('.').expect("a JWT").0;
    let long = format!("{good}{}", "A".repeat(9000));

    let cases = [
        ("one segment", "abc".to_owned()),
        ("two segments", format!("{header}.{payload}")),
        ("four segments", format!("{good}.AAAA")),
        ("a JWE's five segments", format!("{good}.AAAA.AAAA")),
        ("a header that is not base64url JSON", format!("AAAA.{rest}")),
        ("longer than 8 KiB", long),
    ];
    for (id, (case, token)) in (1..).zip(cases) {
        let response = app.send(request(&token, id)).await;
        assert_outcome(&app, &response, id, Expect::InvalidToken, case).await;
    }
    assert_eq!(server.fetches(), 0);
}
