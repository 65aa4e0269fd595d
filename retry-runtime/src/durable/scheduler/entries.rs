//! A [`Scheduler`](crate::durable::Scheduler)'s entries: each one's spec, schedule and task maker, and
//! what this instance has done with each period (which task it made, which period is done);
//! the ids that make each period's task unique across instances are given here.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::durable::client::task::Task;
use crate::durable::error::Error;
use crate::durable::scheduler::recurrence::{Recurrence, never_matches};

/// The longest [`Scheduler::run_until`](crate::durable::Scheduler::run_until) sleeps before it looks at the
/// clock again: a clock that was set, or an enqueue that failed, is dealt with within a second.
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// The most periods an instance catches up on at once, beyond the current one: the most recent
/// missed periods of an entry (see [`Scheduler`](crate::durable::Scheduler)'s "Missed periods").
pub const MAX_CATCH_UP_PERIODS: usize = 100;

/// What makes an entry's task, once per period.
pub(crate) type MakeFn = Box<dyn Fn() -> Task + Send + Sync>;

/// The entries, in the order they were registered.
#[derive(Default)]
pub(crate) struct Entries {
    list: Vec<Entry>,
    /// One per entry; one lock, since an entry's id depends on the entries before it.
    state: Mutex<Vec<EntryState>>,
}

/// One entry: its spec, its schedule and what makes its task.
struct Entry {
    /// `every:60000ms` or `cron:*/5 * * * *`: part of the id of each of its tasks.
    spec: String,
    /// The schedule, or why the entry is invalid (reported by `run_until` and `enqueue_due`).
    recurrence: Result<Recurrence, String>,
    make: MakeFn,
}

/// What this instance has done with an entry.
#[derive(Default)]
struct EntryState {
    /// The start of the latest period this instance is done with: its task enqueued, found
    /// already enqueued, or refused for good (a payload too large, say).
    done: Option<i64>,
    /// The start of the latest period whose task was made, and that task's kind.
    made: Option<(i64, String)>,
    /// When this instance last enqueued the entry's task, and its id.
    enqueued: Option<(i64, String)>,
}

/// An entry as the scheduler's heartbeat writes it.
pub(crate) struct EntryView {
    pub(crate) spec: String,
    /// The kind of the latest task made, `None` before the first.
    pub(crate) kind: Option<String>,
    /// When the next period starts; `None` for an invalid entry.
    pub(crate) next_run_ms: Option<i64>,
    /// When this instance last enqueued its task, and the task's id.
    pub(crate) enqueued: Option<(i64, String)>,
}

impl Entries {
    pub(crate) fn push(
        &mut self,
        spec: String,
        recurrence: Result<Recurrence, String>,
        make: MakeFn,
    ) {
        self.list.push(Entry {
            spec,
            recurrence,
            make,
        });
        self.state
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .push(EntryState::default());
    }

    /// The entries' specs, for `Debug`.
    pub(crate) fn specs(&self) -> Vec<&str> {
        self.list.iter().map(|e| e.spec.as_str()).collect()
    }

    /// Every problem of the entries, in one [`Error::Invalid`].
    pub(crate) fn check(&self, now_ms: i64) -> Result<(), Error> {
        if self.list.is_empty() {
            return Err(Error::Invalid(
                "this scheduler has no entries: register one with Scheduler::every or \
                 Scheduler::cron"
                    .into(),
            ));
        }
        let problems: Vec<String> = self
            .list
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

    /// The task of every period of every entry that is due and not done (see [`Entry::due`]),
    /// each entry's oldest first, with its id set; remembers the kind of each, which tells the
    /// duplicates of an entry apart.
    pub(crate) fn due_tasks(&self, now_ms: i64) -> Vec<(usize, i64, Task)> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut due = Vec::new();
        for (index, entry) in self.list.iter().enumerate() {
            for start in entry.due(state[index].done, now_ms) {
                let task = (entry.make)();
                // Entries of one spec share their periods: every earlier one has made (now, or
                // in an earlier pass) its task of this period or of a later one, and its kind
                // is known.
                let same_before = (0..index)
                    .filter(|&earlier| {
                        self.list[earlier].spec == entry.spec
                            && state[earlier]
                                .made
                                .as_ref()
                                .is_some_and(|(made, kind)| *made >= start && *kind == task.kind())
                    })
                    .count();
                let id = task_id(task.kind(), &entry.spec, same_before + 1, start);
                state[index].made = Some((start, task.kind().to_owned()));
                due.push((index, start, task.task_id(id)));
            }
        }
        due
    }

    pub(crate) fn mark_done(&self, index: usize, start: i64) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let done = &mut state[index].done;
        *done = Some(done.map_or(start, |done| done.max(start)));
    }

    /// Records that the task `id` of entry `index` was enqueued at `at_ms`.
    pub(crate) fn mark_enqueued(&self, index: usize, at_ms: i64, id: String) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state[index].enqueued = Some((at_ms, id));
    }

    /// Every entry, in registration order, as of `now_ms`.
    pub(crate) fn views(&self, now_ms: i64) -> Vec<EntryView> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.list
            .iter()
            .zip(state.iter())
            .map(|(entry, state)| EntryView {
                spec: entry.spec.clone(),
                kind: state.made.as_ref().map(|(_, kind)| kind.clone()),
                next_run_ms: entry.period(now_ms).map(|(_, end)| end),
                enqueued: state.enqueued.clone(),
            })
            .collect()
    }

    /// How long until the next period of any entry starts, at most [`MAX_SLEEP`].
    pub(crate) fn until_next_boundary(&self, now_ms: i64) -> Duration {
        let next = self
            .list
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

    /// A period longer than the completed retention (`retention`, in ms) can be enqueued twice
    /// (see [`Scheduler`](crate::durable::Scheduler)'s docs).
    pub(crate) fn warn_of_long_periods(&self, now_ms: i64, retention: i64) {
        for entry in &self.list {
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

impl Entry {
    /// The period containing `now_ms`, `None` for an invalid entry.
    fn period(&self, now_ms: i64) -> Option<(i64, i64)> {
        self.recurrence.as_ref().ok()?.period(now_ms).ok()
    }

    /// The starts of the periods to enqueue at `now_ms`, oldest first, when this instance is
    /// done with the period that started at `done`: the current period, and every period
    /// between (missed: no pass of this instance ran while it lasted, or its enqueue failed),
    /// at most [`MAX_CATCH_UP_PERIODS`] of them, the most recent. Before its first period
    /// (`done` is `None`) an instance enqueues the current period only: periods that passed
    /// while no scheduler ran are not made up for.
    fn due(&self, done: Option<i64>, now_ms: i64) -> Vec<i64> {
        let Some((start, _)) = self.period(now_ms) else {
            return Vec::new();
        };
        let Some(done) = done else {
            return vec![start];
        };
        if done >= start {
            return Vec::new();
        }
        let mut starts = vec![start];
        // Walked back from the current period: the limit keeps the most recent ones, and a
        // machine asleep for a month is not walked through minute by minute.
        while let Some((previous, _)) = self.period(starts[starts.len() - 1] - 1) {
            if previous <= done {
                break;
            }
            if starts.len() > MAX_CATCH_UP_PERIODS {
                event!(
                    warn,
                    "durable scheduler: more periods were missed than are caught up; the older \
                     ones are skipped",
                    entry = self.spec,
                    caught_up = MAX_CATCH_UP_PERIODS,
                    skipped_after_ms = done,
                    skipped_before_ms = starts[starts.len() - 1]
                );
                break;
            }
            starts.push(previous);
        }
        starts.reverse();
        starts
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(spec: &str, recurrence: Result<Recurrence, String>) -> Entry {
        Entry {
            spec: spec.to_owned(),
            recurrence,
            make: Box::new(|| Task::new("tick", &())),
        }
    }

    #[test]
    fn missed_periods_are_due_oldest_first_and_bounded() {
        const MINUTE: i64 = 60_000;
        let cron = entry("cron:*/5 * * * *", Recurrence::cron("*/5 * * * *"));
        // 22:10 done; at 22:26, 22:15 and 22:20 were missed, 22:25 is current.
        let at_2210 = 1_699_999_800_000;
        assert_eq!(
            cron.due(Some(at_2210), at_2210 + 16 * MINUTE),
            [
                at_2210 + 5 * MINUTE,
                at_2210 + 10 * MINUTE,
                at_2210 + 15 * MINUTE
            ]
        );
        assert_eq!(
            cron.due(None, at_2210 + 16 * MINUTE),
            [at_2210 + 15 * MINUTE]
        );
        assert!(cron.due(Some(at_2210), at_2210 + MINUTE).is_empty());
        let every = entry("every:60000ms", Recurrence::every(Duration::from_secs(60)));
        let due = every.due(Some(0), 1_000 * MINUTE + 1);
        assert_eq!(due.len(), MAX_CATCH_UP_PERIODS + 1);
        assert_eq!(due[0], (1_000 - MAX_CATCH_UP_PERIODS as i64) * MINUTE);
        assert_eq!(due[MAX_CATCH_UP_PERIODS], 1_000 * MINUTE);
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
