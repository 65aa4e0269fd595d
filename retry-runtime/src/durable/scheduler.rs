//! Periodic tasks (asynq's `Scheduler`): entries registered with [`Scheduler::every`] or
//! [`Scheduler::cron`] each enqueue one task per period, and any number of scheduler instances
//! on one database enqueue it exactly once, because the task of each period gets an id made of
//! the entry and the period's start (`periodic:{kind}:{spec}:{start ms}`), which
//! [`Queue::enqueue`] refuses a second time with [`Error::TaskIdConflict`]. Periods are read from
//! the queue's clock, in UTC; cron expressions are parsed by `croner` and laid on the calendar by
//! the few lines of civil-date arithmetic at the end of this file.

use std::cmp::Ordering;
use std::fmt;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use croner::errors::CronError;
use croner::parser::{CronParser, Seconds, Year};
use croner::{CivilDate, CivilDateTime, CivilTime, Cron, CronDateTime, Resolution, Weekday};

use super::error::Error;
use super::queue::Queue;
use super::schedule::{duration_ms, to_ms};
use super::task::Task;

/// The longest [`Scheduler::run_until`] sleeps before it looks at the clock again: a clock that
/// was set, or an enqueue that failed, is dealt with within a second.
const MAX_SLEEP: Duration = Duration::from_secs(1);

type MakeFn = Box<dyn Fn() -> Task + Send + Sync>;

/// Enqueues tasks periodically: every fixed period ([`every`](Scheduler::every)) or on a cron
/// schedule ([`cron`](Scheduler::cron)), each period's task exactly once however many scheduler
/// instances run on the database (asynq's `Scheduler`, without its duplicates).
///
/// # Once per period
///
/// The task of each period gets the id `periodic:{kind}:{spec}:{start}`: the kind of the task
/// the entry's closure made, the entry's spec (`every:60000ms`, or `cron:` and the expression
/// with its fields separated by single spaces) and the period's start in milliseconds since the
/// Unix epoch. The scheduler sets this id, replacing any [`Task::task_id`] the closure gave. An
/// entry whose kind and spec repeat those of an earlier entry of the same scheduler gets `#2`,
/// `#3`, … after its spec, in registration order, so both still run. Each instance calls an
/// entry's closure once per period it has not done yet: keep it cheap, and free of panics.
///
/// [`Queue::enqueue`] refuses an id the queue already holds with [`Error::TaskIdConflict`]: the
/// second instance to reach a period finds its task there, and counts that period as done. So
/// every instance must register the same entries, in the same order. Ids are kept while the
/// task is pending, retried or archived, and once completed for the queue's
/// [completed retention](Queue::completed_retention) (7 days by default): **an entry whose
/// period is longer than that** can be enqueued a second time in one period by a scheduler that
/// starts (or restarts) after the period's completed task was trimmed. Give such a queue a
/// completed retention at least as long as the longest period ([`run_until`](Self::run_until)
/// logs a warning when it is shorter).
///
/// # Periods
///
/// - [`every(period)`](Scheduler::every) periods are aligned to multiples of `period` since the
///   Unix epoch, so all instances agree on them: `every(1 h)` starts each period on the hour (UTC).
/// - [`cron(expr)`](Scheduler::cron) periods run from one match of the expression to the next, in
///   UTC.
///
/// Only the current period is ever enqueued: periods that passed while no scheduler ran are not
/// made up for (as in asynq). The current period's task is enqueued as soon as a scheduler
/// starts, unless another instance already did: a scheduler that was down at the boundary still
/// enqueues the period it starts in.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), retry_runtime::durable::Error> {
/// use std::time::Duration;
/// use retry_runtime::durable::{Queue, Scheduler, Task, TaskState};
/// # use retry_runtime::durable::ManualClock;
/// # let dir = std::env::temp_dir().join(format!("retry-doc-scheduler-{}", std::process::id()));
/// # std::fs::remove_dir_all(&dir).ok();
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let url = format!("sqlite://{}/tasks.db", dir.display());
///
/// // Every instance (process) registers the same entries, in the same order.
/// fn scheduler(q: Queue) -> Scheduler {
///     Scheduler::new(q)
///         .every(Duration::from_secs(3600), || Task::new("report", &"hourly"))
///         .cron("*/5 * * * *", || Task::new("sync", &()).max_retry(2))
/// }
///
/// let q = Queue::connect(&url).await?;
/// # // 2023-11-14 22:13:20 UTC, so that the ids below are exact.
/// # let q = q.with_clock(ManualClock::new(std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000)));
/// // What `run_until` does at each period boundary: enqueue the current periods' tasks.
/// assert_eq!(scheduler(q.clone()).enqueue_due().await?, 2);
/// // Another instance finds this period's tasks already there, and adds none.
/// assert_eq!(scheduler(q.clone()).enqueue_due().await?, 0);
/// assert_eq!(q.inspector().list(TaskState::Pending).await?.len(), 2);
/// // The hour that started at 22:00 UTC, and the 5 minutes that started at 22:10.
/// assert!(q.inspector().get("periodic:report:every:3600000ms:1699999200000").await?.is_some());
/// assert!(q.inspector().get("periodic:sync:cron:*/5 * * * *:1699999800000").await?.is_some());
///
/// // In production: run until shutdown, next to the workers.
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let running = tokio::spawn(scheduler(q.clone()).run_until(async { stopped.await.ok(); }));
/// stop.send(()).ok();
/// running.await.unwrap()?;
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub struct Scheduler {
    queue: Queue,
    entries: Vec<Entry>,
    /// One per entry; one lock, since an entry's id depends on the entries before it.
    state: Mutex<Vec<EntryState>>,
}

struct Entry {
    /// `every:60000ms` or `cron:*/5 * * * *`: part of the id of each of its tasks.
    spec: String,
    /// The schedule, or why the entry is invalid (reported by `run_until` and `enqueue_due`).
    recurrence: Result<Recurrence, String>,
    make: MakeFn,
}

enum Recurrence {
    Every { period_ms: i64 },
    Cron(Box<Cron>),
}

#[derive(Default)]
struct EntryState {
    /// The start of the latest period this instance is done with: its task enqueued, found
    /// already enqueued, or refused for good (a payload too large, say).
    done: Option<i64>,
    /// The start of the latest period whose task was made, and that task's kind.
    made: Option<(i64, String)>,
}

/// What one pass over the entries did.
#[derive(Default)]
struct Pass {
    enqueued: usize,
    /// The id of each task that could not be enqueued, and why.
    failed: Vec<(String, Error)>,
}

impl Scheduler {
    /// A scheduler that enqueues into `queue`, with no entries yet. Periods are read from the
    /// queue's clock ([`Queue::with_clock`]).
    pub fn new(queue: Queue) -> Self {
        Scheduler {
            queue,
            entries: Vec::new(),
            state: Mutex::new(Vec::new()),
        }
    }

    /// Enqueues the task `make` returns once per `period`, periods aligned to multiples of
    /// `period` since the Unix epoch (so `every(Duration::from_secs(3600), …)` starts each
    /// period on the hour, UTC, on every instance). The task's id is set by the scheduler (see
    /// [once per period](Scheduler#once-per-period)); its spec is `every:{period in ms}ms`.
    ///
    /// A period of zero, or one that is not a whole number of milliseconds, is refused by
    /// [`run_until`](Scheduler::run_until) and [`enqueue_due`](Scheduler::enqueue_due) with
    /// [`Error::Invalid`].
    pub fn every(self, period: Duration, make: impl Fn() -> Task + Send + Sync + 'static) -> Self {
        let spec = format!("every:{}ms", period.as_millis());
        let recurrence = every_ms(period).map(|period_ms| Recurrence::Every { period_ms });
        self.push(spec, recurrence, Box::new(make))
    }

    /// Enqueues the task `make` returns once per period of the cron expression `expr`, read in
    /// UTC: a period runs from one time the expression matches to the next.
    ///
    /// `expr` has the 5 standard fields, `minute hour day-of-month month day-of-week`:
    /// `"*/5 * * * *"` every 5 minutes, `"0 3 * * MON-FRI"` at 03:00 on weekdays; the nicknames
    /// `@hourly`, `@daily`, `@weekly`, `@monthly` and `@yearly` too (croner's syntax, which also
    /// knows `L`, `W` and `#`). A day of month and a day of week both given match either, as in
    /// Vixie cron. The task's id is set by the scheduler (see
    /// [once per period](Scheduler#once-per-period)); its spec is `cron:` and the expression,
    /// its fields separated by single spaces.
    ///
    /// An expression that does not parse (or that has 6 or 7 fields: seconds and years are not
    /// standard) does not panic: [`run_until`](Scheduler::run_until) and
    /// [`enqueue_due`](Scheduler::enqueue_due) refuse the scheduler with [`Error::Invalid`],
    /// whose text names the expression and the problem. So does an expression that never
    /// matches, such as `"0 0 31 2 *"`.
    pub fn cron(self, expr: &str, make: impl Fn() -> Task + Send + Sync + 'static) -> Self {
        let fields: Vec<&str> = expr.split_whitespace().collect();
        let spec = format!("cron:{}", fields.join(" "));
        let recurrence = cron_parser()
            .parse(expr)
            .map(|cron| Recurrence::Cron(Box::new(cron)))
            .map_err(|e| {
                format!(
                    "the cron expression {expr:?} is invalid ({e}): write the 5 standard fields \
                     \"minute hour day-of-month month day-of-week\", in UTC, e.g. \"*/5 * * * *\" \
                     for every 5 minutes"
                )
            });
        self.push(spec, recurrence, Box::new(make))
    }

    fn push(mut self, spec: String, recurrence: Result<Recurrence, String>, make: MakeFn) -> Self {
        self.entries.push(Entry {
            spec,
            recurrence,
            make,
        });
        self.state
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .push(EntryState::default());
        self
    }

    /// Runs until `shutdown` completes: enqueues the current period of every entry at once
    /// (unless another instance did), then sleeps until the next period boundary of any entry
    /// and does it again. Wakes at least once a second, so a clock that was set is followed
    /// within a second, and at once when `shutdown` completes.
    ///
    /// Fails at once with [`Error::Invalid`] when the scheduler has no entries or an invalid one
    /// (a bad cron expression, a period of zero: every problem in one message), and with
    /// [`Error::Unreachable`] if the database does not answer at start. Afterwards, an enqueue
    /// that fails is logged (with the `tracing` feature) and the scheduler keeps going: a
    /// database error is tried again within a second while its period lasts; a task the queue
    /// refuses (too large a payload, a blank kind) is skipped until the entry's next period.
    pub async fn run_until<F: Future>(self, shutdown: F) -> Result<(), Error> {
        self.check(to_ms(self.queue.now()))?;
        self.queue.ping().await?;
        self.warn_of_long_periods();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let now_ms = to_ms(self.queue.now());
            let pass = tokio::select! {
                biased;
                _ = &mut shutdown => break,
                pass = self.enqueue_pass(now_ms) => pass,
            };
            for (id, e) in pass.failed {
                event!(
                    warn,
                    "durable scheduler: enqueueing a periodic task failed",
                    task = id,
                    error = e
                );
            }
            let wait = self.until_next_boundary(to_ms(self.queue.now()));
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                () = tokio::time::sleep(wait) => {}
            }
        }
        Ok(())
    }

    /// One step of [`run_until`](Scheduler::run_until): enqueues the task of every entry whose
    /// current period (by the queue's clock) this instance has not enqueued yet, and returns
    /// how many tasks it enqueued. A period whose task another instance already enqueued counts
    /// as done, not as enqueued by this call. For tests, with a
    /// [`ManualClock`](super::ManualClock) every step is exact; and for a scheduler run from
    /// the system's cron.
    ///
    /// Fails with [`Error::Invalid`] like `run_until` for a scheduler with no entries or an
    /// invalid one, before enqueueing anything. Otherwise every entry is tried, and the first
    /// error met is returned: an entry that failed on a database error is tried again at the
    /// next call while its period lasts; one whose task the queue refused (too large a payload,
    /// a blank kind) is done with that period.
    pub async fn enqueue_due(&self) -> Result<usize, Error> {
        let now_ms = to_ms(self.queue.now());
        self.check(now_ms)?;
        let pass = self.enqueue_pass(now_ms).await;
        match pass.failed.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(pass.enqueued),
        }
    }

    /// Every problem of the entries, in one [`Error::Invalid`].
    fn check(&self, now_ms: i64) -> Result<(), Error> {
        if self.entries.is_empty() {
            return Err(Error::Invalid(
                "this scheduler has no entries: register one with Scheduler::every or \
                 Scheduler::cron"
                    .into(),
            ));
        }
        let problems: Vec<String> = self
            .entries
            .iter()
            .filter_map(|entry| match &entry.recurrence {
                Err(why) => Some(why.clone()),
                Ok(recurrence) => recurrence
                    .period(now_ms)
                    .err()
                    .map(|e| never_matches(&entry.spec, &e)),
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Invalid(problems.join("; ")))
        }
    }

    /// Enqueues the due tasks; never fails as a whole.
    async fn enqueue_pass(&self, now_ms: i64) -> Pass {
        let mut pass = Pass::default();
        for (index, start, task) in self.due_tasks(now_ms) {
            let id = task.id().unwrap_or_default().to_owned();
            match self.queue.enqueue(task).await {
                Ok(_) => {
                    event!(
                        debug,
                        "durable scheduler: periodic task enqueued",
                        task = id
                    );
                    pass.enqueued += 1;
                    self.mark_done(index, start);
                }
                // Another instance enqueued this period's task first.
                Err(Error::TaskIdConflict) => self.mark_done(index, start),
                // Tried again while the period lasts.
                Err(e @ (Error::Unreachable(_) | Error::Database(_))) => pass.failed.push((id, e)),
                // Refused for good: the next period's task may do better.
                Err(e) => {
                    self.mark_done(index, start);
                    pass.failed.push((id, e));
                }
            }
        }
        pass
    }

    /// The task of every entry whose current period is not done, with its id set; remembers
    /// the kind of each, which tells the duplicates of an entry apart.
    fn due_tasks(&self, now_ms: i64) -> Vec<(usize, i64, Task)> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut due = Vec::new();
        for (index, entry) in self.entries.iter().enumerate() {
            let Some((start, _)) = entry.period(now_ms) else {
                continue;
            };
            if state[index].done.is_some_and(|done| done >= start) {
                continue;
            }
            let task = (entry.make)();
            // Entries of one spec share their periods: every earlier one has made (now, or in
            // an earlier pass) its task of this period, and its kind is known.
            let same_before = (0..index)
                .filter(|&earlier| {
                    self.entries[earlier].spec == entry.spec
                        && state[earlier]
                            .made
                            .as_ref()
                            .is_some_and(|(made, kind)| *made == start && *kind == task.kind())
                })
                .count();
            let id = task_id(task.kind(), &entry.spec, same_before + 1, start);
            state[index].made = Some((start, task.kind().to_owned()));
            due.push((index, start, task.task_id(id)));
        }
        due
    }

    fn mark_done(&self, index: usize, start: i64) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let done = &mut state[index].done;
        *done = Some(done.map_or(start, |done| done.max(start)));
    }

    /// How long until the next period of any entry starts, at most [`MAX_SLEEP`].
    fn until_next_boundary(&self, now_ms: i64) -> Duration {
        let next = self
            .entries
            .iter()
            .filter_map(|entry| entry.period(now_ms))
            .map(|(_, end)| end)
            .min();
        match next {
            Some(next) => {
                let ms = u64::try_from(next.saturating_sub(now_ms))
                    .unwrap_or(0)
                    .max(1);
                Duration::from_millis(ms).min(MAX_SLEEP)
            }
            None => MAX_SLEEP,
        }
    }

    /// A period longer than the completed retention can be enqueued twice (see the type's docs).
    fn warn_of_long_periods(&self) {
        let now_ms = to_ms(self.queue.now());
        let retention = duration_ms(self.queue.completed_retention);
        for entry in &self.entries {
            if let Some((start, end)) = entry.period(now_ms) {
                if end.saturating_sub(start) > retention {
                    event!(
                        warn,
                        "durable scheduler: this entry's period is longer than the queue's \
                         completed retention: a scheduler that starts after a period's completed \
                         task was trimmed enqueues that period again; raise \
                         Queue::completed_retention to the longest period",
                        entry = entry.spec,
                        period_ms = end.saturating_sub(start),
                        retention_ms = retention
                    );
                }
            }
        }
    }
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let specs: Vec<&str> = self.entries.iter().map(|e| e.spec.as_str()).collect();
        f.debug_struct("Scheduler")
            .field("queue", &self.queue)
            .field("entries", &specs)
            .finish_non_exhaustive()
    }
}

impl Entry {
    /// The period containing `now_ms`, `None` for an invalid entry.
    fn period(&self, now_ms: i64) -> Option<(i64, i64)> {
        self.recurrence.as_ref().ok()?.period(now_ms).ok()
    }
}

impl Recurrence {
    /// The period containing `now_ms`: its start and the next period's start, in milliseconds
    /// since the Unix epoch.
    fn period(&self, now_ms: i64) -> Result<(i64, i64), CronError> {
        match self {
            Recurrence::Every { period_ms } => {
                let start = now_ms - now_ms.rem_euclid(*period_ms);
                Ok((start, start.saturating_add(*period_ms)))
            }
            Recurrence::Cron(cron) => {
                // Cron matches whole minutes: the current second decides.
                let now = UtcSecond(now_ms.div_euclid(1000));
                let start = cron.find_previous_occurrence(&now, true)?;
                let next = cron.find_next_occurrence(&now, false)?;
                Ok((start.0.saturating_mul(1000), next.0.saturating_mul(1000)))
            }
        }
    }
}

/// The standard 5 fields: no seconds, no years.
fn cron_parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
}

fn every_ms(period: Duration) -> Result<i64, String> {
    if period.is_zero() {
        return Err(
            "every(0 s): a period of zero would enqueue without end; give a period of at least \
             1 ms"
                .into(),
        );
    }
    if period.subsec_nanos() % 1_000_000 != 0 {
        return Err(format!(
            "every({period:?}): a period is a whole number of milliseconds (periods are aligned \
             to multiples of it since the Unix epoch, in ms)"
        ));
    }
    i64::try_from(period.as_millis())
        .map_err(|_| format!("every({period:?}): the period is too long to count in milliseconds"))
}

fn never_matches(spec: &str, e: &CronError) -> String {
    let expr = spec.strip_prefix("cron:").unwrap_or(spec);
    format!(
        "the cron expression {expr:?} never matches ({e}): no date has the day of month, month \
         and day of week it asks for"
    )
}

/// `periodic:{kind}:{spec}:{start ms}`, with `#n` after the spec for the n-th entry (n ≥ 2) of
/// one kind and spec.
fn task_id(kind: &str, spec: &str, nth: usize, start_ms: i64) -> String {
    if nth <= 1 {
        format!("periodic:{kind}:{spec}:{start_ms}")
    } else {
        format!("periodic:{kind}:{spec}#{nth}:{start_ms}")
    }
}

// --- UTC for croner: seconds since the Unix epoch, on the proleptic Gregorian calendar. ---

/// A UTC time to the second: what croner searches over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct UtcSecond(i64);

const SECS_PER_DAY: i64 = 86_400;

impl CronDateTime for UtcSecond {
    fn to_civil(&self) -> CivilDateTime {
        let (days, secs) = (
            self.0.div_euclid(SECS_PER_DAY),
            self.0.rem_euclid(SECS_PER_DAY),
        );
        let (year, month, day) = civil_from_days(days);
        // Within ±2^31 years for every time a `SystemTime` in milliseconds can hold.
        let year = i32::try_from(year).unwrap_or(i32::MAX);
        let secs = secs as u32; // 0..86_400
        CivilDateTime::new(
            CivilDate::from_parts_unchecked(year, month, day),
            CivilTime::from_parts_unchecked(secs / 3600, secs % 3600 / 60, secs % 60),
        )
    }

    fn civil_weekday(&self) -> Weekday {
        // 1970-01-01 was a Thursday (4 days from Sunday).
        let days = self.0.div_euclid(SECS_PER_DAY);
        Weekday::from_days_from_sunday((days + 4).rem_euclid(7) as u32)
    }

    fn resolve_civil(&self, civil: CivilDateTime) -> Result<Resolution<Self>, CronError> {
        let days = days_from_civil(i64::from(civil.year()), civil.month(), civil.day());
        let secs = i64::from(civil.hour() * 3600 + civil.minute() * 60 + civil.second());
        let at = days
            .checked_mul(SECS_PER_DAY)
            .and_then(|s| s.checked_add(secs))
            .ok_or(CronError::InvalidDate)?;
        Ok(Resolution::Single(UtcSecond(at)))
    }

    fn checked_add_seconds(&self, seconds: i64) -> Option<Self> {
        self.0.checked_add(seconds).map(UtcSecond)
    }

    fn cmp_instant(&self, other: &Self) -> Ordering {
        self.0.cmp(&other.0)
    }
}

/// Days since 1970-01-01 of a date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400;
    (if month <= 2 { year + 1 } else { year }, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    /// 2023-11-14 22:13:20 UTC, a Tuesday.
    const T0_MS: i64 = 1_700_000_000_000;

    #[test]
    fn civil_dates_agree_with_http_dates_for_four_centuries() {
        const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        // Every 7th day from 1970 to 2370, with a time of day that moves too.
        for n in 0..(400 * 366 / 7) {
            let secs = n * 7 * SECS_PER_DAY + n * 3_607 % SECS_PER_DAY;
            let t = UtcSecond(secs);
            let civil = t.to_civil();
            let expected = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs as u64));
            let ours = format!(
                "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
                DAYS[t.civil_weekday().num_days_from_sunday() as usize],
                civil.day(),
                MONTHS[civil.month() as usize - 1],
                civil.year(),
                civil.hour(),
                civil.minute(),
                civil.second()
            );
            assert_eq!(ours, expected);
            assert_eq!(t.resolve_civil(civil).unwrap(), Resolution::Single(t));
        }
    }

    #[test]
    fn dates_before_1970_round_trip() {
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(-719_468), (0, 3, 1));
        assert_eq!(days_from_civil(1600, 2, 29), -135_081);
        for days in (-800_000..800_000).step_by(97) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn every_periods_are_aligned_to_the_epoch() {
        let hourly = Recurrence::Every {
            period_ms: 3_600_000,
        };
        assert_eq!(
            hourly.period(T0_MS).unwrap(),
            (1_699_999_200_000, 1_700_002_800_000)
        );
        assert_eq!(
            hourly.period(1_699_999_200_000).unwrap().0,
            1_699_999_200_000,
            "a boundary starts its own period"
        );
        assert_eq!(
            hourly.period(1_699_999_199_999).unwrap().0,
            1_699_995_600_000
        );
    }

    #[test]
    fn cron_periods_run_from_one_match_to_the_next() {
        let every_5 = Recurrence::Cron(Box::new(cron_parser().parse("*/5 * * * *").unwrap()));
        // 22:13:20 is in the period 22:10 – 22:15.
        assert_eq!(
            every_5.period(T0_MS).unwrap(),
            (1_699_999_800_000, 1_700_000_100_000)
        );
        assert_eq!(
            every_5.period(1_700_000_100_000).unwrap().0,
            1_700_000_100_000
        );
        assert_eq!(
            every_5.period(1_700_000_099_999).unwrap().0,
            1_699_999_800_000
        );
        // The 13th or a Friday (either, as in Vixie cron; 2023-10-13 was a Friday the 13th):
        // from Monday 2023-11-13 to Friday 2023-11-17.
        let either = Recurrence::Cron(Box::new(cron_parser().parse("0 0 13 * FRI").unwrap()));
        assert_eq!(
            either.period(T0_MS).unwrap(),
            (1_699_833_600_000, 1_700_179_200_000)
        );
        // Mondays at 03:00 UTC: 2023-11-13 03:00 to 2023-11-20 03:00.
        let weekly = Recurrence::Cron(Box::new(cron_parser().parse("0 3 * * MON").unwrap()));
        assert_eq!(
            weekly.period(T0_MS).unwrap(),
            (1_699_844_400_000, 1_700_449_200_000)
        );
    }

    #[test]
    fn only_the_five_standard_cron_fields_parse() {
        assert!(cron_parser().parse("*/5 * * * *").is_ok());
        assert!(cron_parser().parse("@hourly").is_ok());
        assert!(cron_parser().parse("0 */5 * * * *").is_err(), "seconds");
        assert!(cron_parser().parse("*/5 * * * * 2024").is_err(), "years");
        assert!(cron_parser().parse("*/5 * * *").is_err());
        assert!(cron_parser().parse("61 * * * *").is_err());
    }

    #[test]
    fn ids_name_kind_spec_duplicate_and_period() {
        assert_eq!(
            task_id("report", "every:60000ms", 1, 60_000),
            "periodic:report:every:60000ms:60000"
        );
        assert_eq!(
            task_id("report", "cron:*/5 * * * *", 2, 0),
            "periodic:report:cron:*/5 * * * *#2:0"
        );
    }
}
