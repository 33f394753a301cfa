//! A JSON scanner over an event's bytes: it takes exactly the text
//! `serde_json` takes and hands out borrowed slices of it, a string's
//! bytes checked eight at a time, and keeps where a request context's
//! members are, so that no type reads the context again. It checks
//! what `serde_json` checks when it skips a value (no trailing comma, no
//! control character in a string, strict numbers and escapes, any depth);
//! what a value's reader checks beyond that (paired surrogates, a key's
//! UTF-8) is [`Str::text`]'s, asked where the reader would ask it.

use std::borrow::Cow;

use crate::words::{ONES, below};

mod fields;

pub(super) use fields::{Fields, Value};

/// The text is not JSON as `serde_json` reads it.
#[derive(Debug)]
pub(super) struct Invalid;

pub(super) type Scan<T> = Result<T, Invalid>;

pub(super) struct Scanner<'a> {
    bytes: &'a [u8],
    /// The same bytes, when they are UTF-8 (what every front door sends):
    /// then a slice of them is text without a second check.
    text: Option<&'a str>,
    at: usize,
}

/// A string as it is written, without its quotes.
#[derive(Clone, Copy, Default)]
pub(super) struct Str<'a> {
    /// Its bytes, escapes and all.
    pub(super) bytes: &'a [u8],
    pub(super) escaped: bool,
    /// The whole text it is a slice of, when that is UTF-8, and where.
    whole: Option<&'a str>,
    from: usize,
}

impl<'a> Str<'a> {
    /// Its bytes when they are its text: no escape, and UTF-8.
    pub(super) fn plain(self) -> Option<&'a [u8]> {
        (!self.escaped && self.whole.is_some()).then_some(self.bytes)
    }

    /// The string as `serde_json` reads it into a `str`: `None` if it is
    /// not UTF-8 or has a lone surrogate.
    #[inline]
    pub(super) fn text(self) -> Option<Cow<'a, str>> {
        match self.whole {
            // Its ends are next to quotes: always char boundaries.
            Some(whole) if !self.escaped => whole
                .get(self.from..self.from + self.bytes.len())
                .map(Cow::Borrowed),
            _ => self.text_slow(),
        }
    }

    #[cold]
    fn text_slow(self) -> Option<Cow<'a, str>> {
        let raw = match self.whole {
            Some(whole) => whole.get(self.from..self.from + self.bytes.len())?,
            None => std::str::from_utf8(self.bytes).ok()?,
        };
        if self.escaped {
            unescaped(raw).map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(raw))
        }
    }
}

/// A string's text, `"` and all, as `serde_json` reads it into a `str`.
pub(super) fn string_text(literal: &str) -> Option<Cow<'_, str>> {
    let inner = literal.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        unescaped(inner).map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(inner))
    }
}

/// Escapes already checked by the scan, surrogates paired as
/// `serde_json` requires of a `str`. The runs between escapes are copied
/// eight bytes at a time, each word whole and the copy cut back at a
/// backslash: a JSON body's runs are a few bytes each, and a copy of a
/// few bytes by `memcpy` costs more than the word.
fn unescaped(inner: &str) -> Option<String> {
    let bytes = inner.as_bytes();
    // Written in place, with room for the last word's whole copy; the
    // text is never longer than its escaped form.
    let mut text = zeros(bytes.len() + 8);
    let mut to = 0;
    let mut at = 0;
    loop {
        // The run up to the next backslash, or the end.
        loop {
            match bytes
                .get(at..at + 8)
                .and_then(|eight| <[u8; 8]>::try_from(eight).ok())
            {
                Some(eight) => {
                    text.get_mut(to..to + 8)?.copy_from_slice(&eight);
                    let word = u64::from_le_bytes(eight) ^ (ONES * u64::from(b'\\'));
                    let flags = below(word, 1);
                    if flags != 0 {
                        let run = (flags.trailing_zeros() / 8) as usize;
                        to += run;
                        at += run;
                        break;
                    }
                    to += 8;
                    at += 8;
                }
                None => {
                    let rest = bytes.get(at..).unwrap_or_default();
                    let run = rest.iter().position(|&byte| byte == b'\\').unwrap_or(rest.len());
                    text.get_mut(to..to + run)?
                        .copy_from_slice(rest.get(..run).unwrap_or_default());
                    to += run;
                    at += run;
                    break;
                }
            }
        }
        if at >= bytes.len() {
            break;
        }
        let escape = *bytes.get(at + 1)?;
        at += 2;
        let byte = match escape {
            b'"' | b'\\' | b'/' => escape,
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let unit = hex4(inner.get(at..)?)?;
                at += 4;
                let char = match unit {
                    0xD800..=0xDBFF => {
                        let low = inner
                            .get(at..)?
                            .strip_prefix("\\u")
                            .and_then(hex4)
                            .filter(|low| (0xDC00..=0xDFFF).contains(low))?;
                        at += 6;
                        let high = u32::from(unit - 0xD800) << 10;
                        char::from_u32((high | u32::from(low - 0xDC00)) + 0x1_0000)?
                    }
                    0xDC00..=0xDFFF => return None,
                    unit => char::from_u32(u32::from(unit))?,
                };
                let encoded = char.encode_utf8(&mut [0; 4]).len();
                char.encode_utf8(text.get_mut(to..to + encoded)?);
                to += encoded;
                continue;
            }
            _ => return None,
        };
        *text.get_mut(to)? = byte;
        to += 1;
    }
    text.truncate(to);
    // The runs are whole characters of `inner` (a backslash ends none)
    // and the escapes whole characters: this is UTF-8.
    String::from_utf8(text).ok()
}

/// `len` zeros: `vec!` would ask `calloc`, which costs a small body more
/// than an allocation and a fill.
#[allow(clippy::slow_vector_initialization)]
fn zeros(len: usize) -> Vec<u8> {
    let mut zeros = Vec::with_capacity(len);
    zeros.resize(len, 0);
    zeros
}

/// The code unit of four hex digits that start `text`.
fn hex4(text: &str) -> Option<u16> {
    let digits = text.get(..4)?;
    // `from_str_radix` takes a sign; JSON does not.
    if !digits.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    u16::from_str_radix(digits, 16).ok()
}

/// What a scanned value is, by its first byte.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Object,
    Array,
    String,
    Number,
    Literal,
}

impl<'a> Scanner<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            text: std::str::from_utf8(bytes).ok(),
            at: 0,
        }
    }

    /// Over text already known to be UTF-8 (a slice of a scanned event).
    pub(super) fn of_text(text: &'a str) -> Self {
        Self {
            bytes: text.as_bytes(),
            text: Some(text),
            at: 0,
        }
    }

    fn slice(&self, from: usize, to: usize) -> Option<&'a str> {
        match self.text {
            Some(text) => text.get(from..to),
            None => std::str::from_utf8(self.bytes.get(from..to)?).ok(),
        }
    }

    #[inline]
    fn byte(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// The next byte that is not JSON whitespace, not taken.
    #[inline(always)]
    pub(super) fn peek(&mut self) -> Option<u8> {
        match self.byte()? {
            // Every byte that starts a token is above a space.
            byte if byte > b' ' => Some(byte),
            // The one space after a colon.
            b' ' if self.bytes.get(self.at + 1).is_some_and(|&next| next > b' ') => {
                self.at += 1;
                self.byte()
            }
            _ => self.after_blanks(),
        }
    }

    fn after_blanks(&mut self) -> Option<u8> {
        // An indented event's line break and its spaces, fewer than eight
        // (a line of every front door's event): one word, the first byte
        // that is not a space found by its bits.
        let at = self.at;
        if let Some([b'\n', eight @ ..]) = self.bytes.get(at..at + 9)
            && let Ok(eight) = <[u8; 8]>::try_from(eight)
        {
            let not_spaces = u64::from_le_bytes(eight) ^ u64::from_le_bytes([b' '; 8]);
            if not_spaces != 0 {
                let spaces = not_spaces.trailing_zeros() / 8;
                // The byte there, its bits flipped back.
                let byte = (not_spaces >> (spaces * 8)) as u8 ^ b' ';
                if byte > b' ' {
                    self.at = at + 1 + spaces as usize;
                    return Some(byte);
                }
            }
        }
        self.blanks()
    }

    /// Any whitespace: deeper indentation, blank lines, tabs, returns.
    #[cold]
    fn blanks(&mut self) -> Option<u8> {
        // The spaces eight at a time, after a line break.
        if self.byte() == Some(b'\n') {
            self.at += 1;
            while let Some(eight) = self.bytes.get(self.at..self.at + 8)
                && let Ok(eight) = <[u8; 8]>::try_from(eight)
            {
                let not_spaces = u64::from_le_bytes(eight) ^ u64::from_le_bytes([b' '; 8]);
                self.at += (not_spaces.trailing_zeros() / 8) as usize;
                if not_spaces != 0 {
                    break;
                }
            }
        }
        while let Some(byte) = self.byte() {
            if !matches!(byte, b' ' | b'\n' | b'\t' | b'\r') {
                return Some(byte);
            }
            self.at += 1;
        }
        None
    }

    #[inline(always)]
    fn take(&mut self, byte: u8) -> Scan<()> {
        if self.peek() != Some(byte) {
            return Err(Invalid);
        }
        self.at += 1;
        Ok(())
    }

    /// Where the next value starts, past whitespace.
    pub(super) fn mark(&mut self) -> usize {
        self.peek();
        self.at
    }

    /// The bytes from `from` ([`Scanner::mark`]) to here.
    pub(super) fn since(&self, from: usize) -> &'a [u8] {
        self.bytes.get(from..self.at).unwrap_or_default()
    }

    /// Nothing but whitespace is left.
    pub(super) fn end(&mut self) -> Scan<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(Invalid),
        }
    }

    /// Enters an object; `Ok(false)` if the next value is not one.
    pub(super) fn object(&mut self) -> Scan<bool> {
        if self.peek() != Some(b'{') {
            return Ok(false);
        }
        self.at += 1;
        Ok(true)
    }

    /// The next key of the object entered, with its colon taken; `None`
    /// at its end. `first` is true until the first key is read.
    #[inline(always)]
    pub(super) fn key(&mut self, first: &mut bool) -> Scan<Option<Str<'a>>> {
        if !self.next_item(b'}', first)? {
            return Ok(None);
        }
        self.take(b'"')?;
        let key = self.str_rest()?;
        self.take(b':')?;
        Ok(Some(key))
    }

    /// [`Scanner::key`] read into a `str` as [`Str::text`] reads it;
    /// `Some(None)` for a key that is no `str`.
    #[inline(always)]
    pub(super) fn key_text(&mut self, first: &mut bool) -> Scan<Option<Option<Cow<'a, str>>>> {
        if !self.next_item(b'}', first)? {
            return Ok(None);
        }
        self.take(b'"')?;
        let key = self.str_text()?;
        self.take(b':')?;
        Ok(Some(key))
    }

    /// [`Scanner::str`] read into a `str` as [`Str::text`] reads it: a
    /// string without escapes is the slice between its quotes, which is
    /// text when the event is.
    #[inline(always)]
    pub(super) fn text_of_str(&mut self) -> Scan<Option<Cow<'a, str>>> {
        self.take(b'"')?;
        self.str_text()
    }

    #[inline(always)]
    fn str_text(&mut self) -> Scan<Option<Cow<'a, str>>> {
        let from = self.at;
        let rest = self.bytes.get(from..).unwrap_or_default();
        let len = plain_len(rest);
        if let (Some(b'"'), Some(text)) = (rest.get(len), self.text) {
            self.at = from + len + 1;
            return Ok(text.get(from..from + len).map(Cow::Borrowed));
        }
        Ok(self.str_rest()?.text())
    }

    /// Enters an array; `Ok(false)` if the next value is not one.
    pub(super) fn array(&mut self) -> Scan<bool> {
        if self.peek() != Some(b'[') {
            return Ok(false);
        }
        self.at += 1;
        Ok(true)
    }

    /// Whether the array entered has another element, its comma taken.
    #[inline]
    pub(super) fn element(&mut self, first: &mut bool) -> Scan<bool> {
        self.next_item(b']', first)
    }

    /// Past the comma before the next member or element, if there is one:
    /// `false` at `close`, which is taken. `first` is true until then.
    #[inline(always)]
    fn next_item(&mut self, close: u8, first: &mut bool) -> Scan<bool> {
        match self.peek() {
            Some(byte) if byte == close => {
                self.at += 1;
                return Ok(false);
            }
            Some(b',') if !*first => self.at += 1,
            _ if *first => {}
            _ => return Err(Invalid),
        }
        *first = false;
        Ok(true)
    }

    /// The kind of the next value, not taken.
    #[inline]
    pub(super) fn kind(&mut self) -> Scan<Kind> {
        match self.peek() {
            Some(b'{') => Ok(Kind::Object),
            Some(b'[') => Ok(Kind::Array),
            Some(b'"') => Ok(Kind::String),
            Some(b'-' | b'0'..=b'9') => Ok(Kind::Number),
            Some(b'n' | b't' | b'f') => Ok(Kind::Literal),
            _ => Err(Invalid),
        }
    }

    /// The next value, a string.
    #[inline]
    pub(super) fn str(&mut self) -> Scan<Str<'a>> {
        self.take(b'"')?;
        self.str_rest()
    }

    #[inline(always)]
    fn str_rest(&mut self) -> Scan<Str<'a>> {
        let from = self.at;
        let escaped = self.string()?;
        Ok(Str {
            bytes: self.bytes.get(from..self.at - 1).unwrap_or_default(),
            escaped,
            whole: self.text,
            from,
        })
    }

    /// The next value whatever it is, checked; its text, or `None` if it
    /// is not UTF-8.
    #[inline(always)]
    pub(super) fn value(&mut self) -> Scan<Option<&'a str>> {
        let first = self.peek();
        let from = self.at;
        // A string, the most common value, without the nesting's stack.
        if first == Some(b'"') {
            self.at += 1;
            self.string()?;
        } else {
            self.skip()?;
        }
        Ok(self.slice(from, self.at))
    }

    /// [`Scanner::value`], and whether it is a string without escapes.
    #[inline(always)]
    pub(super) fn value_plain(&mut self) -> Scan<(Option<&'a str>, bool)> {
        let first = self.peek();
        let from = self.at;
        let plain = if first == Some(b'"') {
            self.at += 1;
            !self.string()?
        } else {
            self.skip()?;
            false
        };
        Ok((self.slice(from, self.at), plain))
    }

    /// A string's rest, after its opening quote, up to and with its
    /// closing one; whether it has escapes.
    #[inline(always)]
    fn string(&mut self) -> Scan<bool> {
        let mut escaped = false;
        loop {
            self.at += plain_len(self.bytes.get(self.at..).unwrap_or_default());
            match self.byte() {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(escaped);
                }
                Some(b'\\') => {
                    escaped = true;
                    self.at += 1;
                    self.escape()?;
                }
                // A control character, or the end.
                _ => return Err(Invalid),
            }
        }
    }

    fn escape(&mut self) -> Scan<()> {
        let byte = self.byte().ok_or(Invalid)?;
        self.at += 1;
        match byte {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Ok(()),
            b'u' => {
                let digits = self.bytes.get(self.at..self.at + 4).ok_or(Invalid)?;
                if !digits.iter().all(u8::is_ascii_hexdigit) {
                    return Err(Invalid);
                }
                self.at += 4;
                Ok(())
            }
            _ => Err(Invalid),
        }
    }

    fn literal<const N: usize>(&mut self, word: &[u8; N]) -> Scan<()> {
        // Compared as one word, not by a call to `memcmp`.
        let here = self
            .bytes
            .get(self.at..self.at + N)
            .and_then(|here| <&[u8; N]>::try_from(here).ok());
        if here != Some(word) {
            return Err(Invalid);
        }
        self.at += N;
        Ok(())
    }

    fn digits(&mut self) -> usize {
        let from = self.at;
        while self.byte().is_some_and(|byte| byte.is_ascii_digit()) {
            self.at += 1;
        }
        self.at - from
    }

    fn number(&mut self) -> Scan<()> {
        if self.byte() == Some(b'-') {
            self.at += 1;
        }
        match self.byte() {
            Some(b'0') => {
                self.at += 1;
                // One leading zero only.
                if self.byte().is_some_and(|byte| byte.is_ascii_digit()) {
                    return Err(Invalid);
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(Invalid),
        }
        if self.byte() == Some(b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return Err(Invalid);
            }
        }
        if matches!(self.byte(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.byte(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(Invalid);
            }
        }
        Ok(())
    }

    /// One value, nested as deep as it is: the open containers are a
    /// stack of bits, not a recursion.
    fn skip(&mut self) -> Scan<()> {
        // A scalar, most often `null`, without the nesting's stack.
        match self.peek() {
            Some(b'"') => {
                self.at += 1;
                return self.string().map(drop);
            }
            Some(b'-' | b'0'..=b'9') => return self.number(),
            Some(b'n') => return self.literal(b"null"),
            Some(b't') => return self.literal(b"true"),
            Some(b'f') => return self.literal(b"false"),
            _ => {}
        }
        let mut open = Nesting::default();
        loop {
            match self.peek() {
                Some(b'{') => {
                    self.at += 1;
                    let mut first = true;
                    if self.key(&mut first)?.is_some() {
                        open.push(true);
                        continue;
                    }
                }
                Some(b'[') => {
                    self.at += 1;
                    let mut first = true;
                    if self.element(&mut first)? {
                        open.push(false);
                        continue;
                    }
                }
                Some(b'"') => {
                    self.at += 1;
                    self.string()?;
                }
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(b'n') => self.literal(b"null")?,
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                _ => return Err(Invalid),
            }
            // After a value: the next one in its container, or the ends of
            // the containers it closes.
            loop {
                let Some(in_object) = open.top() else {
                    return Ok(());
                };
                let mut first = false;
                let more = if in_object {
                    self.key(&mut first)?.is_some()
                } else {
                    self.element(&mut first)?
                };
                if more {
                    break;
                }
                open.pop();
            }
        }
    }
}

/// How many bytes start `bytes` that a string holds as they are: not a
/// quote, a backslash or a control character. Eight at a time (`bytes`
/// runs on to the end of the text, past the string's closing quote): in
/// each word, the lowest byte flagged is the first such byte, a false
/// flag being carried only upwards.
#[inline(always)]
fn plain_len(bytes: &[u8]) -> usize {
    let mut len = 0;
    while let Some(eight) = bytes.get(len..len + 8) {
        let Ok(eight) = <[u8; 8]>::try_from(eight) else {
            break;
        };
        let word = u64::from_le_bytes(eight);
        // With bit 1 flipped, a quote is 0x20 and a control character
        // stays below it, while 0x20, 0x21 and 0x23 go above: one test
        // for both.
        let flags = below(word ^ (ONES * 0x02), 0x21) | below(word ^ (ONES * u64::from(b'\\')), 1);
        if flags != 0 {
            return len + (flags.trailing_zeros() / 8) as usize;
        }
        len += 8;
    }
    let rest = bytes.get(len..).unwrap_or_default();
    len + rest
        .iter()
        .position(|&byte| byte == b'"' || byte == b'\\' || byte < 0x20)
        .unwrap_or(rest.len())
}

/// The containers a value is inside, innermost last: a bit each, `true`
/// for an object; the first 64 without an allocation.
#[derive(Default)]
struct Nesting {
    depth: usize,
    bits: u64,
    outer: Vec<u64>,
}

impl Nesting {
    fn push(&mut self, object: bool) {
        if self.depth > 0 && self.depth.is_multiple_of(64) {
            self.outer.push(self.bits);
            self.bits = 0;
        }
        self.bits |= u64::from(object) << (self.depth % 64);
        self.depth += 1;
    }

    fn pop(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        self.bits &= !(1 << (self.depth % 64));
        if self.depth > 0 && self.depth.is_multiple_of(64) {
            self.bits = self.outer.pop().unwrap_or_default();
        }
    }

    fn top(&self) -> Option<bool> {
        let top = self.depth.checked_sub(1)?;
        Some(self.bits & (1 << (top % 64)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_ends_at_its_first_quote_backslash_or_control_character() {
        for (text, len) in [
            ("", 0),
            ("abc", 3),
            ("abcdefgh", 8),
            ("abcdefghij\"", 10),
            ("abcdefg\\", 7),
            ("a\u{1f}", 1),
            ("abcdefghi\n", 9),
            ("é€\u{7f}\"", 6),
        ] {
            assert_eq!(plain_len(text.as_bytes()), len, "{text:?}");
        }
    }

    #[test]
    fn every_byte_ends_a_string_exactly_when_json_says_it_does() {
        for byte in 0..=u8::MAX {
            let ends = byte == b'"' || byte == b'\\' || byte < 0x20;
            for at in 0..20 {
                let mut bytes = vec![b'a'; 20];
                bytes[at] = byte;
                // A byte that ends it after the first: the first is found.
                bytes[19] = b'"';
                let len = if ends || at == 19 { at } else { 19 };
                assert_eq!(plain_len(&bytes), len, "{byte:#04x} at {at}");
            }
        }
    }

    /// The runs are copied a word at a time: an escape at every offset of
    /// a word, and at its end, is found.
    #[test]
    fn an_escape_at_any_offset_of_a_word_reads_as_serde_json_reads_it() {
        for escape in [r#"\""#, r"\n", r"\u00e9", r"\\"] {
            for at in 0..=17 {
                let inner = format!("{}{escape}{}", "a".repeat(at), "b".repeat(17 - at));
                let expected = serde_json::from_str::<String>(&format!("\"{inner}\"")).ok();
                assert_eq!(unescaped(&inner), expected, "{inner}");
            }
        }
    }

    #[test]
    fn a_string_with_escapes_reads_as_serde_json_reads_it() {
        for inner in [
            r#"\""#,
            r#"a\"b"#,
            r#"\"\"\""#,
            r#"\\\"\/"#,
            r#"\\"#,
            r#"x\\\\y\\"#,
            r#"{\"id\":1001,\"name\":\"Monstera deliciosa\"}"#,
            r#"\/\n\t\"é\u00e9\ud83c\udf31\\n"#,
            r#"\b\f\r\u0001\"end"#,
            r#"\ud83c"#,
            r#"\udf31\""#,
            // Runs that end a word, cross it, or fill it.
            r#"abcdefg\"abcdefgh\"abcdefghi\nabcdefghijklmnop"#,
            r#"abcdefgh\u00e9ééééé\t"#,
            r#"ééééé€€\/xyz\ud83c\udf31abcdefgh"#,
            r#"a\u0041\u00e9\u20ac"#,
        ] {
            let expected = serde_json::from_str::<String>(&format!("\"{inner}\"")).ok();
            assert_eq!(unescaped(inner), expected, "{inner}");
        }
    }

    #[test]
    fn nesting_past_64_levels_comes_back_out_in_order() {
        let mut open = Nesting::default();
        let kinds: Vec<bool> = (0..200).map(|n| n % 3 == 0).collect();
        for &kind in &kinds {
            open.push(kind);
            assert_eq!(open.top(), Some(kind));
        }
        for &kind in kinds.iter().rev() {
            assert_eq!(open.top(), Some(kind));
            open.pop();
        }
        assert_eq!(open.top(), None);
    }
}
