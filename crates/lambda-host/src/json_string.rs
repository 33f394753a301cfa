//! JSON strings as serde_json writes them, for the JSON this crate writes
//! directly rather than through serde: the log line and the answer's
//! envelope.

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
    let bytes = value.as_bytes();
    let mut start = 0;
    while let Some(at) = bytes
        .get(start..)
        .and_then(first_to_escape)
        .map(|offset| start + offset)
    {
        // `at` is an ASCII byte's index, so a boundary of `value`'s chars.
        out.push_str(value.get(start..at).unwrap_or_default());
        let byte = bytes.get(at).copied().unwrap_or_default();
        match byte {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                for nibble in [byte >> 4, byte & 0xf] {
                    out.push(char::from(HEX.get(usize::from(nibble)).copied().unwrap_or(b'0')));
                }
            }
        }
        start = at + 1;
    }
    out.push_str(value.get(start..).unwrap_or_default());
}

/// The index of the first byte that [`escape`] escapes, eight bytes at a
/// time while none does: most values have none, and are copied whole. A
/// value's last bytes are read as one word too, overlapping the word before.
fn first_to_escape(bytes: &[u8]) -> Option<usize> {
    let mut clean = 0;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        if word_needs_escape(chunk) {
            return position(chunk).map(|offset| clean + offset);
        }
        clean += 8;
    }
    let rest = chunks.remainder();
    if rest.is_empty() {
        return None;
    }
    match bytes.last_chunk::<8>() {
        Some(last) => {
            if !word_needs_escape(last) {
                return None;
            }
            // The overlap was clean, so what is found is in `rest`.
            position(rest).map(|offset| clean + offset)
        }
        None => position(rest).map(|offset| clean + offset),
    }
}

/// Whether one of eight bytes is escaped.
fn word_needs_escape(chunk: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // Non-zero when a byte of `word` is below `n` (n <= 0x80).
    let below = |word: u64, n: u64| word.wrapping_sub(ONES * n) & !word & HIGHS;
    let word = u64::from_le_bytes(<[u8; 8]>::try_from(chunk).unwrap_or_default());
    let found = below(word, 0x20)
        | below(word ^ (ONES * u64::from(b'"')), 1)
        | below(word ^ (ONES * u64::from(b'\\')), 1);
    found != 0
}

fn position(bytes: &[u8]) -> Option<usize> {
    bytes
        .iter()
        .position(|&byte| ESCAPED.get(usize::from(byte)).copied().unwrap_or(true))
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
