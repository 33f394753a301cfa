//! What only the function knows of its answer, for the SERVER span the
//! host writes: its route and its own annotations.

use std::borrow::Cow;

/// At most this many annotations of the function's own: X-Ray indexes
/// at most 50 per trace, two of them the host's.
pub(super) const MAX_ANNOTATIONS: usize = 48;

/// What the function adds to its invocation's SERVER span, set as an
/// extension of its response:
///
/// ```
/// use lambda_host::trace::SpanDetails;
/// # let mut response = lambda_http::Response::new(lambda_http::Body::Empty);
/// response
///     .extensions_mut()
///     .insert(SpanDetails::default().route("/orders/{id}").annotate("Tier", "gold"));
/// ```
///
/// The route becomes `http.route`. Each annotation becomes an attribute
/// and is listed in `aws.xray.annotations`, which X-Ray indexes for its
/// filter expressions (`annotation.Tier = "gold"`); X-Ray takes keys
/// of letters, digits and underscores. The host's own annotations
/// (`ColdStart`, `Status`) win over the function's of the same name. A
/// route alone allocates nothing, but the response's extension does: the
/// host reads it only when [`traced`](super::traced) is true, and a
/// function may leave it out otherwise.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpanDetails {
    route: Option<Cow<'static, str>>,
    annotations: Vec<(&'static str, Annotation)>,
}

/// An annotation's value: X-Ray indexes numbers, booleans and strings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Annotation {
    /// A number.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(Cow<'static, str>),
}

impl SpanDetails {
    /// The route that matched (`/orders/{id}`), as the SERVER span's
    /// `http.route`.
    #[must_use]
    pub fn route(mut self, route: impl Into<Cow<'static, str>>) -> Self {
        self.route = Some(route.into());
        self
    }

    /// An X-Ray annotation: `key` as an attribute of the SERVER span and
    /// listed in `aws.xray.annotations`. A key given twice keeps its last
    /// value; past 48 keys, more are ignored.
    #[must_use]
    pub fn annotate(mut self, key: &'static str, value: impl Into<Annotation>) -> Self {
        let value = value.into();
        if let Some(known) = self.annotations.iter_mut().find(|(known, _)| *known == key) {
            known.1 = value;
        } else if self.annotations.len() < MAX_ANNOTATIONS {
            self.annotations.push((key, value));
        }
        self
    }

    pub(super) fn route_str(&self) -> Option<&str> {
        self.route.as_deref()
    }

    pub(super) fn annotations(&self) -> &[(&'static str, Annotation)] {
        &self.annotations
    }
}

macro_rules! from_int {
    ($($int:ty),+) => {
        $(
            impl From<$int> for Annotation {
                fn from(value: $int) -> Self {
                    Self::Int(i64::from(value))
                }
            }
        )+
    };
}

from_int!(i8, i16, i32, i64, u8, u16, u32);

impl From<u64> for Annotation {
    /// Past `i64::MAX`, the largest integer OTLP carries.
    fn from(value: u64) -> Self {
        Self::Int(i64::try_from(value).unwrap_or(i64::MAX))
    }
}

impl From<bool> for Annotation {
    fn from(value: bool) -> Self {
        Self::Bool(value)
    }
}

impl From<&'static str> for Annotation {
    fn from(value: &'static str) -> Self {
        Self::Str(Cow::Borrowed(value))
    }
}

impl From<String> for Annotation {
    fn from(value: String) -> Self {
        Self::Str(Cow::Owned(value))
    }
}

impl From<Cow<'static, str>> for Annotation {
    fn from(value: Cow<'static, str>) -> Self {
        Self::Str(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_annotated_twice_keeps_its_last_value() {
        let details = SpanDetails::default()
            .route("/orders")
            .annotate("Shard", 40901)
            .annotate("Shard", 40902u32)
            .annotate("Tenant", "t-1")
            .annotate("Retried", true);
        assert_eq!(details.route_str(), Some("/orders"));
        assert_eq!(
            details.annotations(),
            [
                ("Shard", Annotation::Int(40902)),
                ("Tenant", Annotation::Str("t-1".into())),
                ("Retried", Annotation::Bool(true)),
            ]
        );
    }

    #[test]
    fn annotations_past_the_bound_are_ignored() {
        let details = (0..MAX_ANNOTATIONS + 2).fold(SpanDetails::default(), |details, n| {
            let key: &'static str = Box::leak(format!("k{n}").into_boxed_str());
            details.annotate(key, 1)
        });
        assert_eq!(details.annotations().len(), MAX_ANNOTATIONS);
        assert_eq!(details.annotations().last().map(|(key, _)| *key), Some("k47"));
    }

    #[test]
    fn an_unsigned_number_past_what_otlp_carries_is_the_largest_it_does() {
        assert_eq!(Annotation::from(u64::MAX), Annotation::Int(i64::MAX));
    }
}
