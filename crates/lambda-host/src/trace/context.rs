//! Lambda's trace header (`Root=1-…-…;Parent=…;Sampled=1`): the one reading
//! of it, the W3C ids inside it, and the header value an SDK request
//! carries.

use std::fmt::Write as _;

/// The fields of Lambda's trace header, unchecked.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Fields<'a> {
    pub(super) root: Option<&'a str>,
    pub(super) parent: Option<&'a str>,
    pub(super) sampled: bool,
}

impl<'a> Fields<'a> {
    pub(super) fn of(header: &'a str) -> Self {
        let mut fields = Self::default();
        for part in header.split(';') {
            match part.trim().split_once('=') {
                Some(("Root", value)) => fields.root = Some(value),
                Some(("Parent", value)) => fields.parent = Some(value),
                Some(("Sampled", value)) => fields.sampled = value == "1",
                _ => {}
            }
        }
        fields
    }
}

/// The trace id X-Ray shows (`1-…-…`), from Lambda's trace header, as
/// Powertools logs it.
pub fn root(header: &str) -> Option<&str> {
    Fields::of(header).root.filter(|root| !root.is_empty())
}

/// `1-` then 8 and 24 hex digits, what X-Ray writes as a trace id: the 32
/// hex digits of the W3C trace id.
pub(super) fn trace_id(root: &str) -> Option<[u8; 16]> {
    let mut parts = root.split('-');
    let (Some("1"), Some(time), Some(random), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if time.len() != 8 || random.len() != 24 {
        return None;
    }
    let mut id = [0; 16];
    let (high, low) = id.split_at_mut(4);
    hex_into(time, high)?;
    hex_into(random, low)?;
    Some(id)
}

/// 16 hex digits: a segment or span id.
pub(super) fn span_id(id: &str) -> Option<[u8; 8]> {
    let mut bytes = [0; 8];
    (id.len() == 16).then_some(())?;
    hex_into(id, &mut bytes)?;
    Some(bytes)
}

fn hex_into(hex: &str, out: &mut [u8]) -> Option<()> {
    let digit = |byte: u8| match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    };
    for (pair, byte) in hex.as_bytes().chunks_exact(2).zip(out.iter_mut()) {
        let [high, low] = pair else { return None };
        *byte = digit(*high)? << 4 | digit(*low)?;
    }
    Some(())
}

/// Percent-encodes control characters and non-ASCII bytes, the set the
/// SDK's recursion-detection interceptor encodes (`percent_encoding::CONTROLS`),
/// so that any trace header Lambda sends becomes a valid header value.
pub(super) fn encode(value: &str) -> String {
    let mut encoded = String::with_capacity(value.len());
    for byte in value.bytes() {
        if (0x20..0x7f).contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_id_is_the_root_of_lambdas_trace_header() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        assert_eq!(root(header), Some("1-5759e988-bd862e3fe1be46a994272793"));
        assert_eq!(root("Sampled=0;Root=1-a-b"), Some("1-a-b"));
        assert_eq!(root("Parent=1;Sampled=0"), None);
        assert_eq!(root("Root="), None);
    }

    #[test]
    fn the_w3c_ids_are_the_hex_digits_of_root_and_parent() {
        let id = trace_id("1-5759e988-bd862e3fe1be46a994272793").unwrap();
        assert_eq!(id[..4], [0x57, 0x59, 0xe9, 0x88]);
        assert_eq!(id[15], 0x93);
        assert_eq!(
            span_id("53995c3f42cd8ad8"),
            Some([0x53, 0x99, 0x5c, 0x3f, 0x42, 0xcd, 0x8a, 0xd8])
        );
        assert_eq!(span_id("53995c3f42cd8ad"), None);
        assert_eq!(trace_id("1-5759e988-bd862e3fe1be46a99427279g"), None);
    }

    #[test]
    fn a_trace_header_as_lambda_sends_it_is_kept_as_it_is() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        assert_eq!(encode(header), header);
    }

    #[test]
    fn control_characters_and_non_ascii_are_percent_encoded_as_the_sdk_does() {
        assert_eq!(encode("a\tb\u{7f}c\u{e9}d %"), "a%09b%7Fc%C3%A9d %");
    }
}
