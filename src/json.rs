//! JSON strings written directly where serde_json's writer costs more than
//! the text: the answer's plant and the EMF document's ids, with the bytes
//! serde_json writes.

/// Whether serde_json writes `value` between its quotes as it is: it holds
/// no `"`, no `\` and no control character below U+0020, the only
/// characters serde_json escapes.
pub(crate) fn is_plain(value: &str) -> bool {
    value.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\')
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
