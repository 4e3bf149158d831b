//! Rate limits (docs/semantics.md), enforced before the upstream is called: caller-wide
//! (`callers[].rate`, or the rate of the caller's OAuth roles) and per caller per tool (the
//! contract's `rate`). Both are GCRA ("generic cell rate algorithm"): `N/s burst M` admits `M`
//! calls at once and then one every `1/N` s.
//!
//! With `state: memory` the state is governor's keyed limiters, one per distinct rate, swept of
//! idle keys at most once a minute so memory stays bounded however many callers come and go.
//! With `state: redis://…` one Lua script checks every limit of a call and records them only if
//! all admit it, atomically inside Redis on Redis's clock, so any number of replicas together admit
//! what one would. If Redis cannot be reached the call is refused (fail closed): a limit that
//! cannot be checked is not a limit.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use governor::clock::Clock as _;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::Caller;
use crate::config::{Config, Rate, StateBackend};
use crate::contract::ToolContract;
use crate::state::RedisState;

/// Idle limiter keys are swept at most this often.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The `_meta` key of a refusal's retry hint, in milliseconds.
pub const RETRY_AFTER_META: &str = "narrowgate/retryAfterMs";

/// Why a call was refused before the upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A limit is exhausted; the call may succeed after `retry_after`.
    Exceeded {
        limit: String,
        retry_after: Duration,
    },
    /// The shared limiter state cannot be reached, so nothing is admitted.
    Unavailable(String),
}

impl Refusal {
    /// The tool error's text: names the limit and says when to retry.
    pub fn message(&self) -> String {
        match self {
            Refusal::Exceeded { limit, retry_after } => format!(
                "rate limit exceeded: {limit}; retry in {} ms",
                retry_after_ms(*retry_after)
            ),
            Refusal::Unavailable(why) => format!(
                "call refused: the rate limits cannot be checked ({why}); retry once the gateway's limiter state is reachable"
            ),
        }
    }

    /// For `_meta["narrowgate/retryAfterMs"]`: only when it is known.
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            Refusal::Exceeded { retry_after, .. } => Some(retry_after_ms(*retry_after)),
            Refusal::Unavailable(_) => None,
        }
    }
}

fn retry_after_ms(d: Duration) -> u64 {
    u64::try_from(d.as_micros().div_ceil(1000))
        .unwrap_or(u64::MAX)
        .max(1)
}

/// One limit that applies to a call.
struct Limit<'a> {
    caller: &'a str,
    /// `None`: the caller-wide limit.
    tool: Option<&'a str>,
    rate: Rate,
}

impl Limit<'_> {
    fn describe(&self) -> String {
        match self.tool {
            None => format!(
                "caller `{}` may make {} calls across all tools",
                self.caller, self.rate
            ),
            Some(tool) => format!("caller `{}` may call `{tool}` {}", self.caller, self.rate),
        }
    }

    /// The key in the in-memory limiter of this rate.
    fn memory_key(&self) -> String {
        match self.tool {
            None => format!("c\0{}", self.caller),
            Some(tool) => format!("t\0{}\0{tool}", self.caller),
        }
    }

    /// The Redis key. The `{caller}` hash tag keeps a call's keys in one cluster slot.
    fn redis_key(&self) -> String {
        match self.tool {
            None => format!("narrowgate:rl:{{{}}}:caller", self.caller),
            Some(tool) => format!("narrowgate:rl:{{{}}}:tool:{tool}", self.caller),
        }
    }
}

/// The time between two admitted calls at `rate`.
fn emission_interval(rate: Rate) -> Duration {
    let nanos = rate.per.as_nanos() / u128::from(rate.count.get());
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX).max(1))
}

/// The gateway's rate limiter.
pub struct Limits {
    backend: Backend,
    /// Where its state lives, so a reload can keep it ([`Limits::serves`]).
    state: StateBackend,
    /// Until when a caller's calls of a tool (`""`: of any tool) were last refused: what
    /// `search_tools` reports as "rate limited right now" without spending a call of the budget.
    refused: RecentRefusals,
}

/// The latest refusals by (caller, tool), bounded: expired ones are swept when it grows.
#[derive(Default)]
struct RecentRefusals(std::sync::Mutex<HashMap<(String, String), Instant>>);

/// More remembered refusals than this sweeps the expired ones.
const MAX_REFUSALS: usize = 10_000;

impl RecentRefusals {
    fn note(&self, caller: &str, tool: Option<&str>, until: Instant) {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if held.len() >= MAX_REFUSALS {
            let now = Instant::now();
            held.retain(|_, until| *until > now);
            if held.len() >= MAX_REFUSALS {
                return;
            }
        }
        held.insert((caller.to_string(), tool.unwrap_or("").to_string()), until);
    }

    fn until(&self, caller: &str, tool: &str) -> Option<Duration> {
        let held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        [tool, ""]
            .iter()
            .filter_map(|t| held.get(&(caller.to_string(), t.to_string())))
            .filter(|until| **until > now)
            .map(|until| *until - now)
            .max()
    }
}

enum Backend {
    Memory(MemoryLimits),
    Redis(Box<RedisLimits>),
}

impl Limits {
    /// How many keys the in-memory limiters hold (0 for Redis): the tests' view of eviction.
    #[cfg(test)]
    fn memory_keys(&self) -> usize {
        match &self.backend {
            Backend::Memory(m) => m.limiters().iter().map(|l| l.len()).sum(),
            Backend::Redis(_) => 0,
        }
    }

    pub fn from_config(config: &Config) -> Limits {
        match config.state_backend() {
            Ok(StateBackend::Redis(url)) => Limits {
                backend: Backend::Redis(Box::new(RedisLimits::new(&url))),
                state: StateBackend::Redis(url),
                refused: RecentRefusals::default(),
            },
            _ => Limits::memory(),
        }
    }

    /// In-memory limits (for tests and benchmarks).
    pub fn memory() -> Limits {
        Limits {
            backend: Backend::Memory(MemoryLimits::default()),
            state: StateBackend::Memory,
            refused: RecentRefusals::default(),
        }
    }

    /// Whether these limits keep their state where `state` says: then a reload keeps them, and
    /// no caller gets a fresh burst from it. (Memory limiters are per distinct rate, so a rate
    /// the new version changes is a new limiter all the same.)
    pub fn serves(&self, state: &StateBackend) -> bool {
        self.state == *state
    }

    /// Admits one call of `tool` by `caller`, or says why not. Nothing is recorded for a call
    /// without any limit.
    pub async fn admit(&self, caller: &Caller, tool: &ToolContract) -> Result<(), Refusal> {
        self.admit_named(caller, &tool.name, tool.rate).await
    }

    async fn admit_named(
        &self,
        caller: &Caller,
        tool: &str,
        tool_rate: Option<Rate>,
    ) -> Result<(), Refusal> {
        // The per-tool limit first: refused there, the caller-wide budget is left for other tools.
        let limits: Vec<Limit<'_>> = tool_rate
            .map(|rate| Limit {
                caller: &caller.name,
                tool: Some(tool),
                rate,
            })
            .into_iter()
            .chain(caller.rate.map(|rate| Limit {
                caller: &caller.name,
                tool: None,
                rate,
            }))
            .collect();
        if limits.is_empty() {
            return Ok(());
        }
        let checked = match &self.backend {
            Backend::Memory(m) => m.check(&limits),
            // Boxed: the Redis round trip's state would otherwise sit in every call's future.
            Backend::Redis(r) => Box::pin(r.check(&limits)).await,
        };
        if let Err(Refusal::Exceeded { limit, retry_after }) = &checked {
            // Which limit refused: the caller-wide one names no tool.
            let caller_wide = limit.ends_with("across all tools");
            let tool = (!caller_wide).then_some(tool);
            self.refused
                .note(&caller.name, tool, Instant::now() + *retry_after);
        }
        checked
    }

    /// How long `caller`'s calls of `tool` stay refused, if its last one was refused by a rate
    /// limit and the wait is not over (this replica's view; nothing is spent).
    pub fn refused_for(&self, caller: &str, tool: &str) -> Option<Duration> {
        self.refused.until(caller, tool)
    }
}

/// Quota identity: (count, period in ns, burst).
type RateId = (u32, u128, u32);

struct MemoryLimits {
    limiters: RwLock<HashMap<RateId, Arc<DefaultKeyedRateLimiter<String>>>>,
    started: Instant,
    last_sweep_ms: AtomicU64,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        MemoryLimits {
            limiters: RwLock::default(),
            started: Instant::now(),
            last_sweep_ms: AtomicU64::new(0),
        }
    }
}

impl MemoryLimits {
    fn limiter(&self, rate: Rate) -> Arc<DefaultKeyedRateLimiter<String>> {
        let id = (rate.count.get(), rate.per.as_nanos(), rate.burst.get());
        if let Some(l) = self
            .limiters
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
        {
            return l.clone();
        }
        let mut map = self.limiters.write().unwrap_or_else(|p| p.into_inner());
        map.entry(id)
            .or_insert_with(|| {
                let quota = Quota::with_period(emission_interval(rate))
                    .unwrap_or_else(|| Quota::per_hour(rate.count))
                    .allow_burst(rate.burst);
                Arc::new(RateLimiter::keyed(quota))
            })
            .clone()
    }

    fn limiters(&self) -> Vec<Arc<DefaultKeyedRateLimiter<String>>> {
        self.limiters
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    fn check(&self, limits: &[Limit<'_>]) -> Result<(), Refusal> {
        self.maybe_sweep();
        for limit in limits {
            let limiter = self.limiter(limit.rate);
            if let Err(not_until) = limiter.check_key(&limit.memory_key()) {
                return Err(Refusal::Exceeded {
                    limit: limit.describe(),
                    retry_after: not_until.wait_time_from(limiter.clock().now()),
                });
            }
        }
        Ok(())
    }

    /// Forgets keys whose state is back to "fresh" (they would admit a full burst anyway), at
    /// most once per [`SWEEP_EVERY`], off the calling task when a runtime is there.
    fn maybe_sweep(&self) {
        let now_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.last_sweep_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(last) < SWEEP_EVERY.as_millis() as u64
            || self
                .last_sweep_ms
                .compare_exchange(last, now_ms, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let limiters = self.limiters();
        let job = move || sweep(&limiters);
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => drop(handle.spawn_blocking(job)),
            Err(_) => job(),
        }
    }

    #[cfg(test)]
    fn sweep(&self) {
        sweep(&self.limiters());
    }
}

fn sweep(limiters: &[Arc<DefaultKeyedRateLimiter<String>>]) {
    for l in limiters {
        l.retain_recent();
        l.shrink_to_fit();
    }
}

/// GCRA over every key of one call, all or nothing, on Redis's clock (µs).
/// KEYS[i]: a limit's theoretical arrival time; ARGV[2i-1]: its emission interval (µs);
/// ARGV[2i]: its burst. Returns {1, 0, 0} when admitted, else {0, wait µs, index of the limit}.
const GCRA_SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local next_tat = {}
local worst, which = 0, 0
for i = 1, #KEYS do
  local interval = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', KEYS[i])) or now
  if tat < now then tat = now end
  next_tat[i] = tat + interval
  local wait = next_tat[i] - now - interval * burst
  if wait > worst then worst, which = wait, i end
end
if which > 0 then return {0, worst, which} end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], string.format('%d', next_tat[i]), 'PX', math.ceil((next_tat[i] - now) / 1000) + 1)
end
return {1, 0, 0}
";

struct RedisLimits {
    state: RedisState,
    script: redis::Script,
}

impl RedisLimits {
    fn new(url: &str) -> RedisLimits {
        RedisLimits {
            state: RedisState::new(url, "every rate-limited call will be refused"),
            script: redis::Script::new(GCRA_SCRIPT),
        }
    }

    async fn check(&self, limits: &[Limit<'_>]) -> Result<(), Refusal> {
        match self.run_script(limits).await {
            Ok((1, _, _)) => Ok(()),
            Ok((_, wait_us, which)) => {
                let index = usize::try_from(which).unwrap_or(1).saturating_sub(1);
                let limit = limits.get(index).unwrap_or(&limits[0]);
                Err(Refusal::Exceeded {
                    limit: limit.describe(),
                    retry_after: Duration::from_micros(u64::try_from(wait_us).unwrap_or(1)),
                })
            }
            Err(e) => {
                let why = format!("Redis at {} is unreachable: {e}", self.state.shown_url());
                self.state
                    .failed(&format!(
                        "rate limits cannot be checked, calls with a limit are refused (fail closed): {why}"
                    ))
                    .await;
                Err(Refusal::Unavailable(why))
            }
        }
    }

    async fn run_script(&self, limits: &[Limit<'_>]) -> Result<(i64, i64, i64), String> {
        let mut invocation = self.script.prepare_invoke();
        for limit in limits {
            let interval_us = emission_interval(limit.rate).as_micros().max(1);
            invocation
                .key(limit.redis_key())
                .arg(u64::try_from(interval_us).unwrap_or(u64::MAX))
                .arg(limit.rate.burst.get());
        }
        self.state.invoke(&invocation).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(name: &str, rate: Option<&str>) -> Caller {
        Caller {
            name: name.into(),
            tools: vec!["*".into()],
            resources: vec![],
            prompts: vec![],
            scopes: vec![],
            roles: vec![],
            rate: rate.map(|r| r.parse::<Rate>().expect("rate")),
            claims: serde_json::Value::Null,
            discovery: Default::default(),
            always: vec![],
        }
    }

    fn admit(l: &Limits, c: &Caller, tool: &str, rate: Option<&str>) -> Result<(), Refusal> {
        let rate = rate.map(|r| r.parse::<Rate>().expect("rate"));
        futures_lite(l.admit_named(c, tool, rate))
    }

    /// The memory backend never awaits: poll the future once.
    fn futures_lite<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    /// Proves: what `search_tools` reports as "rate limited right now" follows the refusals: a
    /// tool's own limit blocks only that tool for that caller, a caller-wide limit every tool of
    /// that caller, and nothing is spent by asking.
    #[test]
    fn recent_refusals_say_which_tools_are_blocked() {
        let l = Limits::memory();
        let alice = caller("alice", None);
        assert_eq!(admit(&l, &alice, "echo", Some("1/m burst 1")), Ok(()));
        assert_eq!(
            l.refused_for("alice", "echo"),
            None,
            "admitted: nothing blocked"
        );
        assert!(admit(&l, &alice, "echo", Some("1/m burst 1")).is_err());
        let wait = l.refused_for("alice", "echo").expect("blocked");
        assert!(wait.as_secs() >= 50, "{wait:?}");
        assert_eq!(l.refused_for("alice", "add"), None, "another tool");
        assert_eq!(l.refused_for("bob", "echo"), None, "another caller");
        let carol = caller("carol", Some("1/m burst 1"));
        assert_eq!(admit(&l, &carol, "echo", None), Ok(()));
        assert!(admit(&l, &carol, "echo", None).is_err());
        assert!(
            l.refused_for("carol", "add").is_some(),
            "caller-wide: every tool"
        );
    }

    #[test]
    fn a_burst_is_admitted_then_refused_with_a_retry_hint() {
        let l = Limits::memory();
        let alice = caller("alice", Some("1/m burst 3"));
        for _ in 0..3 {
            assert_eq!(admit(&l, &alice, "echo", None), Ok(()));
        }
        let refusal = admit(&l, &alice, "echo", None).expect_err("4th refused");
        let ms = refusal.retry_after_ms().expect("hint");
        assert!((50_000..=60_000).contains(&ms), "{ms}");
        let text = refusal.message();
        assert!(
            text.contains("caller `alice`") && text.contains("1/m burst 3"),
            "{text}"
        );
        // Another caller has its own budget.
        assert_eq!(
            admit(&l, &caller("bob", Some("1/m burst 3")), "echo", None),
            Ok(())
        );
    }

    #[test]
    fn per_tool_limits_are_per_caller_and_per_tool() {
        let l = Limits::memory();
        let alice = caller("alice", None);
        assert_eq!(admit(&l, &alice, "a", Some("1/h")), Ok(()));
        let refusal = admit(&l, &alice, "a", Some("1/h")).expect_err("refused");
        assert!(
            refusal.message().contains("may call `a` 1/h"),
            "{refusal:?}"
        );
        assert_eq!(admit(&l, &alice, "b", Some("1/h")), Ok(()));
        assert_eq!(admit(&l, &caller("bob", None), "a", Some("1/h")), Ok(()));
        // Without any limit nothing is recorded.
        assert_eq!(admit(&l, &alice, "c", None), Ok(()));
        assert_eq!(l.memory_keys(), 3);
    }

    #[test]
    fn idle_keys_are_swept_so_memory_stays_bounded() {
        let l = Limits::memory();
        for i in 0..5000 {
            let c = caller(&format!("c{i}"), Some("1000/s burst 1"));
            assert_eq!(admit(&l, &c, "x", None), Ok(()));
        }
        assert_eq!(l.memory_keys(), 5000);
        // The keys must go idle (full again at 1000/s: 1 ms): that time passing is the
        // behaviour under test.
        std::thread::sleep(Duration::from_millis(20));
        let Backend::Memory(m) = &l.backend else {
            panic!("memory backend")
        };
        m.sweep();
        assert_eq!(l.memory_keys(), 0);
    }

    /// The limiter's cost per admitted call (run with `--ignored --nocapture`; set
    /// `NARROWGATE_BENCH_REDIS=redis://127.0.0.1:PORT` to measure the Redis backend too).
    #[test]
    #[ignore = "a measurement, not a check"]
    fn cost_per_call() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut backends = vec![("memory", Limits::memory())];
        if let Ok(url) = std::env::var("NARROWGATE_BENCH_REDIS") {
            backends.push((
                "redis",
                Limits {
                    backend: Backend::Redis(Box::new(RedisLimits::new(&url))),
                    state: StateBackend::Redis(url.clone()),
                    refused: RecentRefusals::default(),
                },
            ));
        }
        let rate = "1000000/s".parse::<Rate>().ok();
        for (name, limits) in backends {
            let callers: Vec<Caller> = (0..1000)
                .map(|i| caller(&format!("c{i}"), Some("1000000/s")))
                .collect();
            let n = if name == "memory" { 200_000 } else { 5_000 };
            let started = Instant::now();
            runtime.block_on(async {
                for i in 0..n {
                    let c = &callers[i % callers.len()];
                    assert_eq!(limits.admit_named(c, "tool", rate).await, Ok(()));
                }
            });
            let per_call = started.elapsed() / n as u32;
            println!(
                "{name}: {per_call:?} per call (2 limits each), {} keys",
                limits.memory_keys()
            );
        }
    }

    #[test]
    fn emission_intervals() {
        let r = |t: &str| t.parse::<Rate>().expect("rate");
        assert_eq!(emission_interval(r("20/s")), Duration::from_millis(50));
        assert_eq!(emission_interval(r("2/m")), Duration::from_secs(30));
    }
}
