//! The worker's per-system gate (issue 31): what each claim round may take of each external
//! system the worker knows ([`Worker::limit`](crate::durable::Worker::limit),
//! [`Worker::system_of`](crate::durable::Worker::system_of)), and of retries.
//!
//! - **Limits**: a system's tasks held (running or prefetched) stay within its concurrency
//!   limit, and start within its rate (`ramp.rs`'s bucket): the claim asks for no more, so no
//!   task is claimed and given back.
//! - **Breakers**: the system's in-process one (`protect/registry.rs`, fed by the
//!   `#[retry(…, protect)]` calls the handlers make and by the worker's attempts) merged with
//!   the queue's shared one (`shared_breaker.rs`), the more cautious winning, read once per
//!   round: open, its due tasks are deferred to when it half-opens (`claim.rs`); half-open,
//!   one task at a time is claimed (the probe); closed again, it ramps up from its floor.
//! - **Throttles**: a system that throttled a task (`throttle.rs`) is not claimed until the
//!   hint has passed.
//! - **Retry share**: while retries are about, at most `share × concurrency` of them are held;
//!   the rest of the room goes to fresh tasks, and to retries only when no fresh task is due.
//!
//! A worker that knows no system and sees no retry claims as before: the plain claim.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::durable::clock::to_ms;
use crate::durable::store::breakers::Shared;
use crate::durable::types::active::ActiveTask;
use crate::durable::types::kinds::Kinds;
use crate::durable::worker::execution::limit::{SystemLimit, Systems};
use crate::durable::worker::execution::ramp::Ramp;
use crate::protect::BreakerState;

/// The spread of deferred tasks after the breaker's next probe: they do not all come due at
/// one instant.
pub(crate) const DEFER_JITTER: Duration = Duration::from_secs(1);

/// One system the worker knows.
#[derive(Debug)]
pub(crate) struct Watched {
    pub(crate) name: String,
    /// The kinds mapped to it (for the claim's condition).
    pub(crate) kinds: Kinds,
    pub(crate) limit: SystemLimit,
    #[cfg(feature = "metrics")]
    rate_gauge: metrics::Gauge,
}

/// A watched system's state in this worker.
#[derive(Debug)]
struct PerSystem {
    held: usize,
    ramp: Ramp,
    breaker: BreakerState,
    /// Its last claim took all it asked for: more may be due.
    withheld: bool,
    /// Its claims pause until then: the system throttled a task (`throttle.rs`).
    paused_until: Option<Instant>,
}

#[derive(Debug)]
struct State {
    per: Vec<PerSystem>,
    retries_held: usize,
    /// Retries were seen lately: claims split fresh tasks from retries.
    pressure: bool,
}

/// What a held task counts against: its system (an index of the watched ones) and whether it
/// is a retry.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Key {
    system: Option<usize>,
    retry: bool,
}

/// What one claim round may take.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Per watched system, how many of its tasks.
    pub(crate) allowances: Vec<usize>,
    /// Systems whose breaker is open, with when it lets probes through (the queue's clock).
    pub(crate) defer: Vec<(usize, SystemTime)>,
    /// Systems whose shared breaker is past its open time: the round claims the one task its
    /// allowance says only if it takes the queue's probe.
    pub(crate) probes: Vec<usize>,
    /// How many retries may be claimed while fresh tasks are due; `None`: no split.
    pub(crate) retries: Option<usize>,
}

/// The gate of one worker, shared by its processor and attempts.
#[derive(Debug)]
pub(crate) struct Gate {
    pub(crate) watched: Vec<Watched>,
    by_name: HashMap<String, usize>,
    by_kind: HashMap<String, usize>,
    /// The watched systems (a JSON array) and the kinds mapped to them: the condition of the
    /// claim of every other task.
    pub(crate) except: (String, Kinds),
    /// Retries held at most while fresh tasks are due; `usize::MAX`: no share.
    retry_cap: usize,
    state: Mutex<State>,
    /// The shared breakers as last read or written, by queue and system
    /// (`shared_breaker.rs`).
    shared: Mutex<HashMap<String, HashMap<String, Shared>>>,
}

fn json(names: &[&str]) -> String {
    serde_json::to_string(names).unwrap_or_else(|_| "[]".to_owned())
}

impl Gate {
    pub(crate) fn new(systems: &Systems, concurrency: usize) -> Gate {
        let now = Instant::now();
        let names = systems.names();
        let watched: Vec<Watched> = names
            .iter()
            .map(|name| {
                let code = systems.limits.get(*name).copied().unwrap_or_default();
                let kinds = systems
                    .kinds
                    .iter()
                    .filter(|(_, system)| system.as_str() == *name)
                    .map(|(kind, _)| kind.as_str());
                Watched {
                    name: (*name).to_owned(),
                    kinds: Kinds::new(kinds),
                    limit: code.configured(name),
                    #[cfg(feature = "metrics")]
                    rate_gauge: metrics::gauge!("retry_queue_system_rate", "system" => (*name).to_owned()),
                }
            })
            .collect();
        let by_name = names.iter().enumerate().map(|(i, n)| ((*n).to_owned(), i));
        let by_name: HashMap<String, usize> = by_name.collect();
        let by_kind = systems.kinds.iter().map(|(k, s)| (k.clone(), by_name[s]));
        let share = systems.retry_share;
        let retry_cap = if share >= 1.0 {
            usize::MAX
        } else {
            ((share * concurrency as f64).floor() as usize).max(1)
        };
        let per = watched
            .iter()
            .map(|w| PerSystem {
                held: 0,
                ramp: Ramp::new(w.limit.get_rate(), now),
                breaker: BreakerState::Closed,
                withheld: false,
                paused_until: None,
            })
            .collect();
        Gate {
            except: (
                json(&names),
                Kinds::new(systems.kinds.keys().map(String::as_str)),
            ),
            by_kind: by_kind.collect(),
            by_name,
            watched,
            retry_cap,
            state: Mutex::new(State {
                per,
                retries_held: 0,
                // Retries left by an earlier run may be due: the first rounds look.
                pressure: retry_cap != usize::MAX,
            }),
            shared: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a claim round can be the plain claim: no system watched, no retry about.
    pub(crate) fn is_plain(&self) -> bool {
        self.watched.is_empty() && (self.retry_cap == usize::MAX || !self.lock().pressure)
    }

    /// Whether retries were about but none is held: the claim round then asks the store
    /// whether any is due, and [`relax`](Gate::relax)es if none is.
    pub(crate) fn may_relax(&self) -> bool {
        let state = self.lock();
        state.pressure && state.retries_held == 0
    }

    /// No retry is due in the served queues: claims go back to the plain claim.
    pub(crate) fn relax(&self) {
        self.lock().pressure = false;
    }

    /// What `task` counts against.
    pub(crate) fn key(&self, task: &ActiveTask) -> Key {
        let system = match task.system() {
            Some(name) => self.by_name.get(name).copied(),
            None => self.by_kind.get(task.kind()).copied(),
        };
        Key {
            system,
            retry: task.retried() > 0,
        }
    }

    /// The round's plan at `queue_now` (the queue's clock): each system's breaker looked at
    /// (a system back from open starts its slow start), its allowance, and the retries' share.
    pub(crate) fn plan(&self, queue: &str, queue_now: SystemTime) -> Plan {
        let now = Instant::now();
        let shared = self.shared_of(queue);
        let mut state = self.lock();
        let mut plan = Plan {
            allowances: Vec::with_capacity(self.watched.len()),
            defer: Vec::new(),
            probes: Vec::new(),
            retries: (self.retry_cap != usize::MAX && state.pressure)
                .then(|| self.retry_cap.saturating_sub(state.retries_held)),
        };
        for (i, (w, s)) in self.watched.iter().zip(state.per.iter_mut()).enumerate() {
            let own = crate::protect::breaker_state(&w.name).unwrap_or(BreakerState::Closed);
            let (breaker, probe) = merged(own, shared.get(&w.name), queue_now, now);
            if probe {
                plan.probes.push(i);
            }
            let paused = s.paused_until.is_some_and(|until| until > now);
            let allowance = match breaker {
                // Throttled: nothing claimed (nor deferred) until the pause ends.
                _ if paused => 0,
                BreakerState::Open { until } => {
                    let wait = until.saturating_duration_since(now);
                    plan.defer
                        .push((i, queue_now + wait.max(Duration::from_millis(1))));
                    0
                }
                // One probe at a time.
                BreakerState::HalfOpen => usize::from(s.held == 0),
                BreakerState::Closed => {
                    if s.breaker != BreakerState::Closed {
                        s.ramp.start(now);
                    }
                    let room = w
                        .limit
                        .get_concurrency()
                        .map_or(usize::MAX, |n| n - s.held.min(n));
                    room.min(s.ramp.allowance(now))
                }
            };
            s.breaker = breaker;
            plan.allowances.push(allowance);
            #[cfg(feature = "metrics")]
            w.rate_gauge.set(s.ramp.rate().unwrap_or(f64::INFINITY));
        }
        plan
    }

    /// A claim took `tasks` (of watched system `system`, or of none) having asked for `asked`.
    pub(crate) fn taken(&self, system: Option<usize>, tasks: &[ActiveTask], asked: usize) {
        let mut state = self.lock();
        let retries = tasks.iter().filter(|t| t.retried() > 0).count();
        state.retries_held += retries;
        state.pressure |= retries > 0 && self.retry_cap != usize::MAX;
        if let Some(s) = system.and_then(|i| state.per.get_mut(i)) {
            s.held += tasks.len();
            s.ramp.take(tasks.len());
            s.withheld = tasks.len() == asked && asked > 0;
        }
    }

    /// A held task ended: `succeeded` says how its attempt went, if it ran to its end. Returns
    /// whether to claim at once (its system had more due than it could take).
    pub(crate) fn release(&self, key: Key, succeeded: Option<bool>) -> bool {
        let mut state = self.lock();
        if key.retry {
            state.retries_held = state.retries_held.saturating_sub(1);
        }
        // A failed attempt may have left a retry behind.
        state.pressure |= succeeded == Some(false) && self.retry_cap != usize::MAX;
        let Some(s) = key.system.and_then(|i| state.per.get_mut(i)) else {
            return key.retry && state.pressure;
        };
        s.held = s.held.saturating_sub(1);
        let now = Instant::now();
        if let Some(succeeded) = succeeded {
            s.ramp.record(succeeded, now);
        }
        // A slot of a system with more due: claim now, unless its rate holds them back (then
        // `next_start` says when).
        s.withheld && s.ramp.is_full(now)
    }

    /// When a system's rate lets its next task start, if a system waits for it with tasks due,
    /// or when a throttled system's pause ends.
    pub(crate) fn next_start(&self) -> Option<Instant> {
        let now = Instant::now();
        let state = self.lock();
        let pauses = state.per.iter().filter_map(|s| s.paused_until);
        state
            .per
            .iter()
            .filter(|s| s.withheld && s.breaker == BreakerState::Closed)
            .filter_map(|s| s.ramp.next_token(now))
            .chain(pauses.filter(|until| *until > now))
            .min()
    }

    /// The system of `task`, if the worker knows it, throttled it: its claims pause for `wait`
    /// (or longer, if an earlier pause ends later). A task of no known system: nothing pauses.
    pub(crate) fn pause(&self, task: &ActiveTask, wait: Duration) {
        let Some(i) = self.key(task).system else {
            return;
        };
        let until = Instant::now() + wait;
        if let Some(s) = self.lock().per.get_mut(i) {
            s.paused_until = Some(s.paused_until.map_or(until, |earlier| earlier.max(until)));
        }
    }

    /// The shared breakers of `queue`, by system, as last read or written.
    pub(crate) fn shared_of(&self, queue: &str) -> HashMap<String, Shared> {
        let shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        shared.get(queue).cloned().unwrap_or_default()
    }

    /// Replaces what is known of `queue`'s shared breakers (a claim round read them all).
    pub(crate) fn absorb(&self, queue: &str, rows: Vec<(String, Shared)>) {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        shared.insert(queue.to_owned(), rows.into_iter().collect());
    }

    /// Records `system`'s shared breaker in `queue` as this worker just wrote it.
    pub(crate) fn remember(&self, queue: &str, system: &str, row: Shared) {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        let queue = shared.entry(queue.to_owned()).or_default();
        queue.insert(system.to_owned(), row);
    }

    /// The name of the system `task` calls: the one it names, else its kind's (`system_of`).
    pub(crate) fn system_name<'t>(&'t self, task: &'t ActiveTask) -> Option<&'t str> {
        task.system().or_else(|| {
            let i = *self.by_kind.get(task.kind())?;
            Some(self.watched[i].name.as_str())
        })
    }

    /// Whether any watched system has a breaker: then each claim round reads the shared ones.
    pub(crate) fn shares_breakers(&self) -> bool {
        self.watched
            .iter()
            .any(|w| crate::protect::breaker_state(&w.name).is_some())
    }

    /// The watched systems as they stand: name, tasks held, the rate in force (`None`:
    /// unlimited), whether it ramps, and its breaker.
    pub(crate) fn snapshot(&self) -> Vec<(String, usize, Option<f64>, bool, BreakerState)> {
        let state = self.lock();
        self.watched
            .iter()
            .zip(&state.per)
            .map(|(w, s)| {
                let breaker =
                    crate::protect::breaker_state(&w.name).unwrap_or(BreakerState::Closed);
                (
                    w.name.clone(),
                    s.held,
                    s.ramp.rate(),
                    s.ramp.is_ramping(),
                    breaker,
                )
            })
            .collect()
    }
}

/// A system's breaker as a claim round sees it: this process's (`own`) and the queue's shared
/// one together, the more cautious winning: open if either is (until the later time, on the
/// runtime's clock); half-open if either is. `true` with it: the shared one is past its open
/// time, and the round must take the queue's probe to claim a task.
fn merged(
    own: BreakerState,
    shared: Option<&Shared>,
    queue_now: SystemTime,
    now: Instant,
) -> (BreakerState, bool) {
    let Some(shared) = shared else {
        return (own, false);
    };
    let now_ms = to_ms(queue_now);
    if let Some(until) = shared.open_at(now_ms) {
        let wait = Duration::from_millis(u64::try_from(until - now_ms).unwrap_or(0));
        let until = match own {
            BreakerState::Open { until: mine } => mine.max(now + wait),
            _ => now + wait,
        };
        return (BreakerState::Open { until }, false);
    }
    match own {
        BreakerState::Open { .. } => (own, false),
        _ if shared.half_open_at(now_ms) => (BreakerState::HalfOpen, true),
        _ => (own, false),
    }
}
