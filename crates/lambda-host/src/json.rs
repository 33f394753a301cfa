//! JSON out of the request path without a panic: one serialiser for an
//! answer's body and for a line written beside it.

use serde::Serialize;

/// `value` as JSON text, or `fallback` if it cannot be written. Plain
/// structs of strings, numbers and maps only fail on a map key that is not
/// a string or bytes that are not UTF-8; the fallback keeps the caller
/// panic-free and says what goes out instead.
pub fn to_string<T: Serialize + ?Sized>(value: &T, fallback: &'static str) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| fallback.to_owned())
}

/// `value` as JSON text appended to `out`, for a line built in a buffer of
/// the caller's size and written at once. `false`, and `out` as it was, if
/// it cannot be written: never part of a document.
pub fn append<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> bool {
    let start = out.len();
    let written = serde_json::to_writer(&mut *out, value).is_ok();
    if !written {
        out.truncate(start);
    }
    written
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn what_cannot_be_written_leaves_the_buffer_as_it_was() {
        let mut out = b"kept".to_vec();
        let unwritable = BTreeMap::from([((1, 2), "a key that is not a string")]);
        assert!(!append(&unwritable, &mut out));
        assert_eq!(out, b"kept");
        assert_eq!(to_string(&unwritable, "{}"), "{}");

        assert!(append(&BTreeMap::from([("a", 1)]), &mut out));
        assert_eq!(out, br#"kept{"a":1}"#);
    }
}
