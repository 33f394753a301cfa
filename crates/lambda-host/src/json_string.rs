//! JSON strings as serde_json writes them, for the JSON this crate writes
//! directly rather than through serde: the log line and the answer's
//! envelope.

use crate::words::{ONES, below};

/// `value` as a JSON string, escaped as serde_json escapes.
#[inline]
pub(crate) fn string(out: &mut String, value: &str) {
    out.push('"');
    escape(out, value);
    out.push('"');
}

/// serde_json's escapes: `"` and `\`, the short forms of backspace, form
/// feed, newline, carriage return and tab, `\u00XX` (lower-case hex) for
/// the other control characters; everything else as it is.
pub(crate) fn escape(out: &mut String, value: &str) {
    // Most values have nothing to escape: one scan and one copy, and the
    // loop out of line.
    match first_to_escape(value.as_bytes(), 0) {
        None => out.push_str(value),
        Some(at) => escape_from(out, value, at),
    }
}

/// [`escape`] of a value whose first byte to escape is at `at`.
#[inline(never)]
fn escape_from(out: &mut String, value: &str, at: usize) {
    let bytes = value.as_bytes();
    // `start`: the first byte not yet copied.
    let mut start = 0;
    let mut next = Some(at);
    while let Some(at) = next {
        // `at` is an ASCII byte's index, so a boundary of `value`'s chars.
        out.push_str(value.get(start..at).unwrap_or_default());
        start = at + 1;
        let byte = bytes.get(at).copied().unwrap_or_default();
        match byte {
            // The byte itself is copied with the piece that follows it: one
            // copy less for each (a JSON body has a quote every few bytes).
            b'"' | b'\\' => {
                out.push('\\');
                start = at;
            }
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => control(out, byte),
        }
        next = first_to_escape(bytes, at + 1);
    }
    out.push_str(value.get(start..).unwrap_or_default());
}

/// `\u00XX`, lower-case hex, for a control character without a short form.
#[cold]
#[inline(never)]
fn control(out: &mut String, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\u00");
    for nibble in [byte >> 4, byte & 0xf] {
        out.push(char::from(HEX.get(usize::from(nibble)).copied().unwrap_or(b'0')));
    }
}

/// The index of the first byte from `from` on that [`escape`] escapes,
/// eight bytes at a time: most values have none, and are copied whole. A
/// value's last bytes are read as one word too, overlapping the word
/// before.
#[inline]
fn first_to_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(chunk) = bytes
        .get(at..at + 8)
        .and_then(|chunk| <[u8; 8]>::try_from(chunk).ok())
    {
        let found = escaped_in(u64::from_le_bytes(chunk));
        if found != 0 {
            return Some(at + first_flagged(found));
        }
        at += 8;
    }
    let left = bytes.len().checked_sub(at).filter(|&left| left > 0)?;
    match bytes.last_chunk::<8>() {
        Some(last) => {
            // The bytes before `at` shifted out (zeros come in above, which
            // are flagged, and masked off): a byte flagged before `at` would
            // otherwise borrow into the flags of the bytes after it.
            let skipped = 8 - left;
            let word = u64::from_le_bytes(*last) >> (8 * skipped);
            let found = escaped_in(word) & (u64::MAX >> (8 * skipped));
            (found != 0).then(|| at + first_flagged(found))
        }
        None => bytes
            .get(at..)?
            .iter()
            .position(|&byte| ESCAPED.get(usize::from(byte)).copied().unwrap_or(true))
            .map(|offset| at + offset),
    }
}

/// Each byte of `word` (little-endian) that [`escape`] escapes, flagged by
/// its high bit. The lowest flag is exact; one above it may not be (a
/// borrow), which is why only the first is read.
fn escaped_in(word: u64) -> u64 {
    below(word, 0x20) | below(word ^ (ONES * u64::from(b'"')), 1) | below(word ^ (ONES * u64::from(b'\\')), 1)
}

/// The index of the byte of the lowest flag in `found` (not zero).
fn first_flagged(found: u64) -> usize {
    (found.trailing_zeros() / 8) as usize
}

/// The bytes [`escape`] escapes.
#[allow(
    clippy::indexing_slicing,
    reason = "evaluated by the compiler, which refuses an index out of bounds"
)]
static ESCAPED: [bool; 256] = {
    let mut escaped = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        escaped[byte] = true;
        byte += 1;
    }
    escaped[b'"' as usize] = true;
    escaped[b'\\' as usize] = true;
    escaped
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Two bytes side by side, escaped or not, anywhere in values of every
    /// length to past three words: a flag read from the wrong byte (a
    /// borrow from the byte before, in a word read whole or in the last
    /// one, which overlaps) shows as a difference from serde_json.
    #[test]
    fn pairs_of_bytes_anywhere_are_escaped_as_serde_json_escapes_them() {
        let bytes = ['"', '#', '\\', ']', '\n', ' ', '\u{1}', '\u{1f}', 'a', 'é'];
        for len in 0..26 {
            for at in 0..=len {
                for first in bytes {
                    for second in bytes {
                        let mut value: String = "abcdefgh".chars().cycle().take(len).collect();
                        value.insert(at, second);
                        value.insert(at, first);
                        let mut ours = String::new();
                        string(&mut ours, &value);
                        assert_eq!(ours, serde_json::to_string(&value).unwrap(), "{value:?}");
                    }
                }
            }
        }
    }
}
