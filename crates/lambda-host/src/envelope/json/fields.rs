//! An object's members as the event's one scan records them: where each
//! key and value is, so that a type's reader need not scan it again.

use super::{Scan, Scanner, Str};

/// How many members of an object [`Fields`] keeps: more than a request
/// context of any front door has.
const FIELDS: usize = 32;

/// An object's members as the event's one scan found them, so that a
/// type's reader need not scan the object again: where each key and value
/// is in the text, a few words each. The members of one object in it are
/// kept too: an HTTP API context's `http`, a REST API context's
/// `identity`.
#[derive(Default)]
pub(in crate::envelope) struct Fields<'a> {
    /// The text they are in; `None` if it is not UTF-8 (nothing is kept).
    text: Option<&'a str>,
    members: Spans<FIELDS>,
    nested: Spans<24>,
    /// Which member `nested` holds; empty if none.
    nested_key: &'static [u8],
}

/// The members whose objects [`Fields`] keeps, the first one found.
const NESTED: [&[u8]; 2] = [b"http", b"identity"];

/// Where an object's members are; `whole` if all of them are there: the
/// object had at most `N`.
#[derive(Clone, Copy)]
struct Spans<const N: usize> {
    spans: [Span; N],
    len: usize,
    whole: bool,
}

impl<const N: usize> Default for Spans<N> {
    fn default() -> Self {
        Self {
            spans: [Span::ZERO; N],
            len: 0,
            whole: false,
        }
    }
}

impl<'a> Fields<'a> {
    /// The members, if all of them are here.
    pub(in crate::envelope) fn all(&self) -> Option<impl Iterator<Item = (Str<'a>, Value<'a>)> + '_> {
        self.members_of(&self.members)
    }

    /// The members of the object's member `key` (one of [`NESTED`]), if
    /// it is an object and all of them are here.
    pub(in crate::envelope) fn nested(
        &self,
        key: &[u8],
    ) -> Option<impl Iterator<Item = (Str<'a>, Value<'a>)> + '_> {
        self.members_of(&self.nested).filter(|_| self.nested_key == key)
    }

    fn members_of<'s, const N: usize>(
        &'s self,
        spans: &'s Spans<N>,
    ) -> Option<impl Iterator<Item = (Str<'a>, Value<'a>)> + 's> {
        let text = self.text.filter(|_| spans.whole)?;
        let range = |(from, to): (u32, u32)| from as usize..to as usize;
        Some(spans.spans.get(..spans.len)?.iter().map(move |span| {
            let key = range(span.key);
            let key = Str {
                bytes: text.as_bytes().get(key.clone()).unwrap_or_default(),
                escaped: span.key_escaped,
                whole: Some(text),
                from: key.start,
            };
            let value = Value {
                text: text.get(range(span.value)).unwrap_or_default(),
                plain_string: span.value_plain,
            };
            (key, value)
        }))
    }
}

/// Offsets as `u32`, which keeps the spans that every event's members
/// hold, zeroed and moved with them, at 20 bytes each rather than 48.
/// A text past `u32::MAX` bytes is not kept (its objects are read again).
#[derive(Clone, Copy)]
struct Span {
    key: (u32, u32),
    value: (u32, u32),
    key_escaped: bool,
    value_plain: bool,
}

impl Span {
    /// All zeros: an array of them is a fill, not a loop.
    const ZERO: Self = Self {
        key: (0, 0),
        value: (0, 0),
        key_escaped: false,
        value_plain: false,
    };
}

/// A member's value as scanned: its text, and whether it is a string
/// without escapes (its text between the quotes is the string).
#[derive(Clone, Copy)]
pub(in crate::envelope) struct Value<'a> {
    pub(in crate::envelope) text: &'a str,
    pub(in crate::envelope) plain_string: bool,
}

impl<'a> Scanner<'a> {
    /// The next value, checked, its text; if it is an object, its members
    /// kept in `fields`. Its bytes come too, for a value that is not UTF-8.
    pub(in crate::envelope) fn value_into(
        &mut self,
        fields: &mut Fields<'a>,
    ) -> Scan<(Option<&'a str>, &'a [u8])> {
        fields.members.whole = false;
        fields.nested.whole = false;
        fields.nested_key = b"";
        // Offsets fit a span's `u32`s.
        fields.text = self.text.filter(|text| u32::try_from(text.len()).is_ok());
        self.peek();
        let from = self.at;
        if self.byte() != Some(b'{') || self.text.is_none() {
            let text = self.value()?;
            return Ok((text, self.bytes.get(from..self.at).unwrap_or_default()));
        }
        self.members_into(
            &mut fields.members,
            Some((&mut fields.nested, &mut fields.nested_key)),
        )?;
        Ok((self.slice(from, self.at), &[]))
    }

    /// An object's members into `spans`; those of the first member named
    /// in [`NESTED`] whose value is an object into `nested`, and its name.
    fn members_into<const N: usize, const M: usize>(
        &mut self,
        spans: &mut Spans<N>,
        mut nested: Option<(&mut Spans<M>, &mut &'static [u8])>,
    ) -> Scan<()> {
        self.take(b'{')?;
        spans.len = 0;
        spans.whole = true;
        let mut first = true;
        while let Some(key) = self.key(&mut first)? {
            let inner = match nested.as_mut() {
                Some((inner, held)) if held.is_empty() && self.peek() == Some(b'{') => key
                    .plain()
                    .and_then(|plain| NESTED.into_iter().find(|name| *name == plain))
                    .map(|name| {
                        **held = name;
                        inner
                    }),
                _ => None,
            };
            let (value_from, value_plain) = match inner {
                Some(inner) => {
                    let from = self.at;
                    self.members_into(inner, None::<(&mut Spans<0>, &mut &'static [u8])>)?;
                    (from, false)
                }
                None => self.member_value()?,
            };
            // Past `u32::MAX`, the offsets are cut, and not read: the text
            // is not kept.
            let span = Span {
                key: (key.from as u32, (key.from + key.bytes.len()) as u32),
                value: (value_from as u32, self.at as u32),
                key_escaped: key.escaped,
                value_plain,
            };
            match spans.spans.get_mut(spans.len) {
                Some(slot) => {
                    *slot = span;
                    spans.len += 1;
                }
                _ => spans.whole = false,
            }
        }
        Ok(())
    }

    /// Skips a member's value: where it starts, and whether it is a
    /// string without escapes.
    #[inline(always)]
    fn member_value(&mut self) -> Scan<(usize, bool)> {
        let first = self.peek();
        let from = self.at;
        if first == Some(b'"') {
            self.at += 1;
            return Ok((from, !self.string()?));
        }
        self.skip()?;
        Ok((from, false))
    }

    /// The next member's value, for a reader that scans an object again.
    pub(in crate::envelope) fn field(&mut self) -> Scan<Option<Value<'a>>> {
        let (from, plain_string) = self.member_value()?;
        Ok(self.slice(from, self.at).map(|text| Value { text, plain_string }))
    }
}
