//! The invocation's deadline, as the point in time by which its answer must
//! be with Lambda, and the margins that leave room to send it.
//!
//! Lambda gives each invocation a deadline (`Lambda-Runtime-Deadline-Ms`,
//! the function's `Timeout` from the invoke). On classic Lambda an
//! invocation still running then is ended by the platform, which answers
//! the caller with a generic error and resets the environment (the next
//! request pays a cold start). On Lambda Managed Instances nothing ends it:
//! it keeps its slot, and the environment takes fewer invocations until it
//! is done. So every invocation is ended before its deadline, on both: the
//! handler stops waiting for its calls at [`RESPONSE_MARGIN`] before it and
//! answers with the function's own error; the loop stops waiting for the
//! handler a little later, shortly before it.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lambda_http::{Request, RequestExt};

/// Left between the moment the handler stops waiting and the deadline: for
/// the answer to be rendered, encoded and posted to the Runtime API. At
/// 128 MB a function gets about 7 ms of CPU in every 100 ms period, so one
/// period can pass before it runs again: the margin covers two.
pub const RESPONSE_MARGIN: Duration = Duration::from_millis(250);

/// Left between the moment the loop gives up on a handler that has not
/// answered (and fails the invocation) and the deadline. Smaller than
/// [`RESPONSE_MARGIN`], so that a handler that keeps to its own deadline is
/// never cut short by the loop.
pub(crate) const BACKSTOP_MARGIN: Duration = Duration::from_millis(100);

// The loop's cut comes strictly before the deadline, and strictly after the
// handler's: a backstop at the deadline itself, or one that would cut a
// handler keeping to its own margin, does not build.
const _: () = assert!(
    BACKSTOP_MARGIN.as_millis() > 0 && BACKSTOP_MARGIN.as_millis() < RESPONSE_MARGIN.as_millis(),
    "0 < BACKSTOP_MARGIN < RESPONSE_MARGIN"
);

/// The point in time `margin` before a deadline given as Unix time in
/// milliseconds, on the monotonic clock. A deadline already past (or within
/// the margin) is now. `None`, the same as no deadline at all, when it is
/// too far ahead to be represented, or more than [`NOT_A_DEADLINE`] in the
/// past.
pub(crate) fn before(deadline_ms: u64, margin: Duration) -> Option<Instant> {
    before_at(deadline_ms, margin, SystemTime::now(), Instant::now())
}

/// How far in the past a deadline can be and still be one. Lambda sends
/// Unix time in milliseconds; `cargo lambda watch` (1.9.2) sends the
/// timeout itself, `600000`, which read as Unix time is January 1970: every
/// local invocation would be past its deadline before it started
/// (docs/upstream/cargo-lambda-watch-deadline-is-a-duration.md). No real
/// invocation waits a day to be handed out, so a value that old is not a
/// point in time, and there is no deadline to keep.
pub(crate) const NOT_A_DEADLINE: Duration = Duration::from_secs(24 * 3600);

/// When a handler should stop waiting and answer: [`RESPONSE_MARGIN`]
/// before the invocation's deadline. `None` without a Lambda context, or
/// with `Context::default()`'s deadline of 0, which no invocation has
/// (tests and tools that drive a handler directly).
pub fn respond_by(request: &Request) -> Option<Instant> {
    let deadline_ms = request.lambda_context_ref()?.deadline;
    if deadline_ms == 0 {
        return None;
    }
    before(deadline_ms, RESPONSE_MARGIN)
}

/// Runs `future` until `cut`, when there is one: `None` if the cut came
/// first (the future is then dropped).
pub async fn until<F: Future>(cut: Option<Instant>, future: F) -> Option<F::Output> {
    match cut {
        None => Some(future.await),
        Some(cut) => tokio::time::timeout_at(cut.into(), future).await.ok(),
    }
}

fn before_at(deadline_ms: u64, margin: Duration, wall: SystemTime, now: Instant) -> Option<Instant> {
    let deadline = UNIX_EPOCH.checked_add(Duration::from_millis(deadline_ms))?;
    if wall
        .duration_since(deadline)
        .is_ok_and(|ago| ago > NOT_A_DEADLINE)
    {
        return None;
    }
    let left = deadline
        .duration_since(wall)
        .unwrap_or(Duration::ZERO)
        .saturating_sub(margin);
    now.checked_add(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cut_is_the_margin_before_the_deadline() {
        let wall = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let now = Instant::now();
        let deadline_ms = 1_700_000_000_000 + 3_000;
        assert_eq!(
            before_at(deadline_ms, RESPONSE_MARGIN, wall, now),
            Some(now + Duration::from_millis(2_750))
        );
    }

    /// The deadline `ahead` of `now`, on the monotonic clock.
    fn deadline_in(ahead: Duration) -> (u64, SystemTime, Instant, Instant) {
        let wall = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let now = Instant::now();
        let deadline_ms = 1_700_000_000_000 + u64::try_from(ahead.as_millis()).expect("fits");
        (deadline_ms, wall, now, now + ahead)
    }

    /// From a deadline a millisecond away to Lambda's longest timeout,
    /// on both sides of each margin.
    const AHEAD_MS: [u64; 10] = [1, 50, 99, 100, 101, 249, 250, 251, 3_000, 900_000];

    #[test]
    fn the_loops_cut_comes_strictly_before_a_deadline_in_the_future() {
        for ahead in AHEAD_MS.map(Duration::from_millis) {
            let (deadline_ms, wall, now, deadline) = deadline_in(ahead);
            let cut = before_at(deadline_ms, BACKSTOP_MARGIN, wall, now).expect("a cut");
            assert!(
                cut < deadline,
                "{ahead:?} ahead: cut {:?} before it",
                deadline - cut
            );
            assert_eq!(cut, now.max(deadline - BACKSTOP_MARGIN), "{ahead:?} ahead");
        }
    }

    #[test]
    fn the_loops_cut_never_comes_before_the_handlers_and_after_it_when_there_is_room() {
        for ahead in AHEAD_MS.map(Duration::from_millis) {
            let (deadline_ms, wall, now, _) = deadline_in(ahead);
            let handler = before_at(deadline_ms, RESPONSE_MARGIN, wall, now).expect("a cut");
            let backstop = before_at(deadline_ms, BACKSTOP_MARGIN, wall, now).expect("a cut");
            if ahead > BACKSTOP_MARGIN {
                assert!(handler < backstop, "{ahead:?} ahead");
            } else {
                // No room left for either: both give up at once.
                assert_eq!((handler, backstop), (now, now), "{ahead:?} ahead");
            }
        }
    }

    #[test]
    fn a_deadline_already_past_or_inside_the_margin_is_now() {
        let wall = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let now = Instant::now();
        for deadline_ms in [
            1_699_913_600_000,
            1_699_999_999_000,
            1_700_000_000_000,
            1_700_000_000_200,
        ] {
            assert_eq!(
                before_at(deadline_ms, RESPONSE_MARGIN, wall, now),
                Some(now),
                "{deadline_ms}"
            );
        }
    }

    #[test]
    fn a_duration_sent_as_a_deadline_is_no_deadline() {
        let wall = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let now = Instant::now();
        for deadline_ms in [0, 600_000, 1_699_913_599_999] {
            assert_eq!(
                before_at(deadline_ms, RESPONSE_MARGIN, wall, now),
                None,
                "{deadline_ms}"
            );
        }
    }

    #[test]
    fn a_deadline_far_ahead_is_far_ahead_or_none_and_never_panics() {
        let in_a_year = Instant::now() + Duration::from_secs(365 * 24 * 3600);
        for deadline_ms in [4_102_444_800_000, u64::MAX] {
            assert!(
                before(deadline_ms, RESPONSE_MARGIN).is_none_or(|cut| cut > in_a_year),
                "{deadline_ms}"
            );
        }
    }
}
