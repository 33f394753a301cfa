//! JSON out of the request path without a panic.

use serde::Serialize;

/// `value` as JSON text, or `fallback` if it cannot be written. Plain
/// structs of strings, numbers and maps only fail on a map key that is not
/// a string or bytes that are not UTF-8; the fallback keeps the caller
/// panic-free and says what goes out instead.
pub fn to_string<T: Serialize + ?Sized>(value: &T, fallback: &'static str) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| fallback.to_owned())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn what_cannot_be_written_is_the_fallback() {
        let unwritable = BTreeMap::from([((1, 2), "a key that is not a string")]);
        assert_eq!(to_string(&unwritable, "{}"), "{}");
        assert_eq!(to_string(&BTreeMap::from([("a", 1)]), "{}"), r#"{"a":1}"#);
    }
}
