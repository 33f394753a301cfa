//! JSON strings as serde_json writes them, for the JSON this crate writes
//! directly rather than through serde: the log line and the answer's
//! envelope.

/// `value` as a JSON string, escaped as serde_json escapes.
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
/// time while none does: most values have none, and are copied whole.
fn first_to_escape(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // Non-zero when a byte of `word` is below `n` (n <= 0x80).
    let below = |word: u64, n: u64| word.wrapping_sub(ONES * n) & !word & HIGHS;
    let mut clean = 0;
    for chunk in bytes.chunks_exact(8) {
        let word = u64::from_le_bytes(<[u8; 8]>::try_from(chunk).unwrap_or_default());
        let found = below(word, 0x20)
            | below(word ^ (ONES * u64::from(b'"')), 1)
            | below(word ^ (ONES * u64::from(b'\\')), 1);
        if found != 0 {
            break;
        }
        clean += 8;
    }
    let rest = bytes.get(clean..)?;
    let offset = rest
        .iter()
        .position(|&byte| byte < 0x20 || byte == b'"' || byte == b'\\')?;
    Some(clean + offset)
}
