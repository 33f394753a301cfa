//! JSON strings written directly where serde_json's writer costs more than
//! the text: the answer's plant and the EMF document's ids, with the bytes
//! serde_json writes.

/// Whether serde_json writes `value` between its quotes as it is: it holds
/// no `"`, no `\` and no control character below U+0020, the only
/// characters serde_json escapes.
pub(crate) fn is_plain(value: &str) -> bool {
    // Eight bytes at a time: the values are ids and names of tens of bytes.
    // The last bytes are read as one word too, overlapping the one before.
    let bytes = value.as_bytes();
    let mut words = bytes.chunks_exact(8);
    words.all(|word| !word_has_escape(word))
        && match bytes.last_chunk::<8>() {
            Some(last) => words.remainder().is_empty() || !word_has_escape(last),
            None => bytes.iter().all(|&b| is_plain_byte(b)),
        }
}

fn is_plain_byte(b: u8) -> bool {
    b >= 0x20 && b != b'"' && b != b'\\'
}

/// Whether one of eight bytes is escaped. A byte is flagged when it is below
/// 0x20, or equal to `"` or `\` (it is below 1 once xor-ed with them); a
/// byte at or above 0x80 never is, so UTF-8 passes.
fn word_has_escape(word: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // Non-zero when a byte of `word` is below `n` (n <= 0x80).
    let below = |word: u64, n: u64| word.wrapping_sub(ONES * n) & !word & HIGHS;
    let word = u64::from_le_bytes(<[u8; 8]>::try_from(word).unwrap_or_default());
    let found = below(word, 0x20)
        | below(word ^ (ONES * u64::from(b'"')), 1)
        | below(word ^ (ONES * u64::from(b'\\')), 1);
    found != 0
}

/// `value` as a JSON string, as serde_json writes it.
pub(crate) fn push_string(out: &mut String, value: &str) {
    if is_plain(value) {
        out.push('"');
        out.push_str(value);
        out.push('"');
    } else {
        // serde_json's escapes, into a String: its output is UTF-8.
        out.push_str(&serde_json::to_string(value).unwrap_or_default());
    }
}

/// `value` as a JSON string, as serde_json writes it.
pub(crate) fn write_string(out: &mut Vec<u8>, value: &str) {
    if is_plain(value) {
        out.push(b'"');
        out.extend_from_slice(value.as_bytes());
        out.push(b'"');
    } else {
        let _ = serde_json::to_writer(out, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_to_escape_is_found_at_any_place_in_a_word_or_in_the_rest() {
        let reference = |value: &str| value.bytes().all(is_plain_byte);
        for byte in 0_u8..0x80 {
            for len in [1, 3, 4, 5, 7, 8, 9, 16, 17, 35] {
                for at in 0..len {
                    let mut value = "é".repeat(len);
                    value.replace_range(at * 2..at * 2 + 2, &format!("{}x", char::from(byte)));
                    assert_eq!(is_plain(&value), reference(&value), "{value:?}");
                    assert_eq!(
                        is_plain(&value),
                        byte >= 0x20 && byte != b'"' && byte != b'\\',
                        "{value:?}"
                    );
                }
            }
        }
        assert!(is_plain("c6af9ac6-7b61-11e6-9a41-93e812345678"));
        assert!(is_plain(""));
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let mut values: Vec<String> = (0_u8..0x80)
            .map(|byte| format!("a{}b", char::from(byte)))
            .collect();
        values.extend(
            [
                "",
                "Monstera deliciosa",
                "ü🌱\u{7f}\u{85}",
                "\"\\",
                "1-5759e988-bd862e3fe1be46a994272793",
            ]
            .map(str::to_owned),
        );
        for value in values {
            let theirs = serde_json::to_string(&value).unwrap();
            let mut ours = String::new();
            push_string(&mut ours, &value);
            assert_eq!(ours, theirs, "{value:?}");
            let mut ours = Vec::new();
            write_string(&mut ours, &value);
            assert_eq!(String::from_utf8(ours).unwrap(), theirs, "{value:?}");
        }
    }
}
