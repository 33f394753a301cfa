//! The `Authorization` header: any bytes parse without panicking, and the
//! parser and the authenticator agree with RFC 6750 and the contract.

use super::*;

fn authorization(values: &[&[u8]]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for value in values {
        if let Ok(value) = HeaderValue::from_bytes(value) {
            headers.append(AUTHORIZATION, value);
        }
    }
    headers
}

/// `bearer` with each letter in either case.
fn bearer_scheme() -> impl Strategy<Value = String> {
    vec(any::<bool>(), 6).prop_map(|upper| {
        "bearer"
            .chars()
            .zip(upper)
            .map(|(c, upper)| if upper { c.to_ascii_uppercase() } else { c })
            .collect()
    })
}

const B64TOKEN: &str = "[A-Za-z0-9._~+/-]{1,40}={0,3}";

/// Header-ish bytes: the pieces a bearer header is made of, plus anything.
fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        bearer_scheme().prop_map(String::into_bytes),
        Just(b" ".to_vec()),
        Just(b"=".to_vec()),
        B64TOKEN.prop_map(String::into_bytes),
        vec(any::<u8>(), 1..4),
    ];
    vec(piece, 0..6).prop_map(|pieces| pieces.concat())
}

/// Like `header_bytes`, but always a valid header value: the bytes HTTP
/// forbids there (controls other than tab, DEL) become `x`.
fn header_value() -> impl Strategy<Value = Vec<u8>> {
    header_bytes().prop_map(|bytes| {
        bytes
            .into_iter()
            .map(|b| {
                if (b < b' ' && b != b'\t') || b == 0x7f {
                    b'x'
                } else {
                    b
                }
            })
            .collect()
    })
}

fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn any_authorization_header_parses_without_panicking_into_a_b64token_it_contains(
        value in header_bytes()
    ) {
        let headers = authorization(&[&value]);
        if let Ok(token) = bearer_token(&headers) {
            let text = std::str::from_utf8(&value).expect("a parsed header is text");
            prop_assert!(text.ends_with(token), "{text:?} -> {token:?}");
            let (scheme, spaces) = text[..text.len() - token.len()].split_at(6);
            prop_assert!(scheme.eq_ignore_ascii_case("bearer"), "{text:?}");
            prop_assert!(!spaces.is_empty() && spaces.bytes().all(|b| b == b' '), "{text:?}");
            prop_assert!(is_b64token(token), "{token:?}");
        }
    }

    #[test]
    fn every_b64token_after_the_bearer_scheme_in_any_case_is_returned_exactly(
        scheme in bearer_scheme(),
        spaces in 1..4usize,
        token in B64TOKEN,
    ) {
        let value = format!("{scheme}{}{token}", " ".repeat(spaces));
        let headers = authorization(&[value.as_bytes()]);
        prop_assert_eq!(bearer_token(&headers), Ok(token.as_str()));
    }

    #[test]
    fn a_token_with_a_character_outside_b64token_is_an_invalid_token(
        scheme in bearer_scheme(),
        before in "[A-Za-z0-9]{1,8}",
        bad in "[ !\"#$%&'(),:;<>?@\\[\\\\\\]^`{|}\u{80}-\u{ff}=]",
        after in "[A-Za-z0-9]{1,8}",
    ) {
        let value = format!("{scheme} {before}{bad}{after}");
        let headers = authorization(&[value.as_bytes()]);
        prop_assert_eq!(bearer_token(&headers), Err(AuthError::InvalidToken), "{:?}", value);
    }

    #[test]
    fn any_other_scheme_means_missing_credentials(
        scheme in "[!-~]{1,12}",
        rest in "[ -~]{0,20}",
    ) {
        prop_assume!(!scheme.eq_ignore_ascii_case("bearer"));
        let value = format!("{scheme} {rest}");
        let headers = authorization(&[value.as_bytes()]);
        prop_assert_eq!(bearer_token(&headers), Err(AuthError::MissingCredentials));
    }

    #[test]
    fn two_authorization_headers_are_refused_whatever_they_hold(
        first in header_value(),
        second in header_value(),
    ) {
        let headers = authorization(&[&first, &second]);
        prop_assert_eq!(headers.get_all(AUTHORIZATION).iter().count(), 2);
        prop_assert_eq!(bearer_token(&headers), Err(AuthError::InvalidToken));
    }

    #[test]
    fn the_authenticator_accepts_its_token_and_nothing_else(
        value in prop_oneof![header_bytes(), Just(b"Bearer right-token".to_vec())]
    ) {
        let headers = authorization(&[&value]);
        let authenticator = Authenticator::with_static_tokens(&["right-token"]);
        let verdict = runtime().block_on(authenticator.authenticate(&headers));
        match bearer_token(&headers) {
            Ok("right-token") => prop_assert_eq!(verdict, Ok(())),
            Ok(_) => prop_assert_eq!(verdict, Err(AuthError::InvalidToken)),
            Err(err) => prop_assert_eq!(verdict, Err(err)),
        }
    }
}
