//! JSON out of the request path without a panic.

use serde::Serialize;

/// `value` as JSON text, or `fallback` if it cannot be written. Plain
/// structs of strings, numbers and maps only fail on a map key that is not
/// a string or bytes that are not UTF-8; the fallback keeps the caller
/// panic-free and says what goes out instead.
pub fn to_string<T: Serialize + ?Sized>(value: &T, fallback: &'static str) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| fallback.to_owned())
}
