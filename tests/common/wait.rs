//! Waiting for a condition instead of sleeping for a guessed time: every helper here polls the
//! condition itself at a short interval and, once its deadline has passed, panics saying what
//! never happened and what it saw instead. A fixed sleep is either too short on a loaded machine
//! (a flaky test) or too long everywhere else (a slow one).

use std::time::{Duration, Instant};

/// How often the helpers look again: short enough to add little to a test's time, long enough
/// not to load two shared cores.
pub const POLL_EVERY: Duration = Duration::from_millis(20);

/// Calls `check` every [`POLL_EVERY`] until it returns `Ok`, and returns that; once `within` has
/// passed, panics saying `what` did not happen, with the last `Err` (what was seen instead).
/// Blocking: for plain `#[test]`s and for conditions outside the async runtime's reach.
#[track_caller]
pub fn wait_until<T>(
    within: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        let last = match check() {
            Ok(done) => return done,
            Err(last) => last,
        };
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {within:?}; last seen: {last}"
        );
        std::thread::sleep(POLL_EVERY);
    }
}

/// Reads a value every [`POLL_EVERY`] until `done` holds for it, and returns it; once `within`
/// has passed, panics saying `what` did not happen, showing the last value with `show`.
#[track_caller]
pub fn wait_for_value<T>(
    within: Duration,
    what: &str,
    mut read: impl FnMut() -> T,
    done: impl Fn(&T) -> bool,
    show: impl Fn(&T) -> String,
) -> T {
    wait_until(within, what, || judged(read(), &done, &show))
}

/// `Ok(value)` when `done` holds for it, else `Err` showing it: the check that the waits on a
/// value read again and again make of each reading.
pub fn judged<T>(
    value: T,
    done: impl Fn(&T) -> bool,
    show: impl Fn(&T) -> String,
) -> Result<T, String> {
    if done(&value) {
        Ok(value)
    } else {
        Err(show(&value))
    }
}

/// [`wait_until`] for async checks, pausing `pause` between attempts without blocking the
/// runtime; `context` adds what helps to read a failure (a log, say) to the panic message.
pub async fn wait_until_async<T>(
    within: Duration,
    pause: Duration,
    what: &str,
    context: impl Fn() -> String,
    mut attempt: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        let last = match attempt().await {
            Ok(done) => return done,
            Err(last) => last,
        };
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {within:?}; last attempt: {last}\n{}",
            context()
        );
        tokio::time::sleep(pause).await;
    }
}
