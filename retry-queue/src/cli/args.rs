//! The command line, as clap reads it: every command, its flags and their defaults.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use retry_runtime::durable::{DEFAULT_QUEUE, TaskState};

/// The arguments of `retry-queue`.
#[derive(Debug, Parser)]
#[command(
    name = "retry-queue",
    version,
    about = "See and steer a durable task queue of retry-runtime",
    propagate_version = true
)]
pub(crate) struct Cli {
    /// The task database: sqlite://PATH (an existing file) or postgres://user:password@host:port/db
    #[arg(long, env = "RETRY_QUEUE_DB", value_name = "URL")]
    pub db: String,
    /// Print JSON (for scripts) instead of a table
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do
    #[command(subcommand)]
    pub command: Command,
}

/// The commands of `retry-queue`.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Every queue of the database: tasks per state, paused or not, finished and failed today
    /// (UTC), the age of the oldest pending task
    Stats,
    /// List, show and act on tasks
    #[command(subcommand)]
    Task(TaskCommand),
    /// Pause or unpause a queue
    #[command(subcommand)]
    Queue(QueueCommand),
    /// The tasks of a state grouped by their last error, most frequent first
    Errors {
        /// The state whose tasks are grouped
        #[arg(long, value_parser = state_parser(), default_value = "retry")]
        state: TaskState,
        /// The queue
        #[arg(long, default_value = DEFAULT_QUEUE)]
        queue: String,
    },
    /// Finished and failed attempts per hour (or day) of a queue, oldest first
    History {
        /// The last N hours, this one included (1 to 168; 24 without --days)
        #[arg(long, value_name = "N", conflicts_with = "days",
              value_parser = clap::value_parser!(u32).range(1..=168))]
        hours: Option<u32>,
        /// The last N UTC days, today included (1 to 90)
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=90))]
        days: Option<u32>,
        /// The queue
        #[arg(long, default_value = DEFAULT_QUEUE)]
        queue: String,
    },
    /// The live workers (by their heartbeats): host, pid, queues, queues led, tasks running
    Workers,
    /// A queue's tasks per external system (due, deferred, in flight), and what the live
    /// workers report of each system: its breaker and the rate its tasks start at
    Systems {
        /// The queue
        #[arg(long, default_value = DEFAULT_QUEUE)]
        queue: String,
    },
    /// The entries of the live schedulers: kind, spec, next run, last enqueue
    Schedulers,
    /// The schema's numbered versions: which are applied, apply the pending ones, revert
    #[command(subcommand)]
    Migrate(MigrateCommand),
    /// Serve the web dashboard. Its token (required off loopback), at least 16 characters,
    /// comes from --token-file, else --token, else RETRY_QUEUE_TOKEN
    Dash {
        /// Where to listen; an address other than loopback needs a token
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Refuse every action (the page shows no buttons)
        #[arg(long)]
        read_only: bool,
        /// Require `Authorization: Bearer T` on every API request. Every user of the machine
        /// sees it in `ps`: prefer --token-file or RETRY_QUEUE_TOKEN
        #[arg(long, value_name = "T", conflicts_with = "token_file")]
        token: Option<String>,
        /// Read the token from this file (surrounding whitespace trimmed)
        #[arg(long, value_name = "PATH")]
        token_file: Option<PathBuf>,
    },
}

/// `retry-queue task …`.
#[derive(Debug, Subcommand)]
pub(crate) enum TaskCommand {
    /// One page of the tasks in a state
    Ls {
        /// The state to list (like `errors`, the retry tasks by default)
        #[arg(long, value_parser = state_parser(), default_value = "retry")]
        state: TaskState,
        /// The queue
        #[arg(long, default_value = DEFAULT_QUEUE)]
        queue: String,
        /// The page, from 1
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        page: u32,
        /// The page after this cursor (the `next` a page ends with): fast however deep
        #[arg(long, conflicts_with = "page")]
        after: Option<String>,
        /// Tasks per page
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
        size: u32,
        /// Only tasks of this kind (pages by cursor: --after, not --page)
        #[arg(long, conflicts_with = "page")]
        kind: Option<String>,
        /// Only tasks whose id, payload or last error contains TEXT, ignoring case; reads at
        /// most the next 10 000 tasks of the state and says so when it stopped there
        #[arg(long, value_name = "TEXT", conflicts_with = "page")]
        search: Option<String>,
    },
    /// The kinds of the tasks in a state, sorted (at most 200)
    Kinds(StateArgs),
    /// One action on several tasks: each that refuses it (unknown, active, …) is reported and
    /// the others go on (at most 1000 ids)
    Batch {
        /// What to do with each task
        #[arg(value_parser = ["run", "delete", "archive", "cancel"])]
        action: String,
        /// The tasks' ids
        #[arg(required = true, num_args = 1..=1000)]
        ids: Vec<String>,
        /// The queue
        #[arg(long, default_value = DEFAULT_QUEUE)]
        queue: String,
    },
    /// Everything about one task, its payload included
    Show(TaskId),
    /// Run the task again as soon as a worker is free (scheduled, retry, archived, completed)
    Run(TaskId),
    /// Delete the task (not while a worker holds it)
    Delete(TaskId),
    /// Archive the task (pending, scheduled or retry)
    Archive(TaskId),
    /// Cancel the task: archived at once (pending, scheduled, retry), or stopped by its worker
    /// within a second and archived (active); never retried
    Cancel(TaskId),
    /// Run every task in a state again (scheduled, retry, archived, completed)
    RunAll(StateArgs),
    /// Delete every task in a state (not active)
    DeleteAll(StateArgs),
}

/// A task of a queue.
#[derive(Debug, Args)]
pub(crate) struct TaskId {
    /// The task's id
    pub id: String,
    /// The queue
    #[arg(long, default_value = DEFAULT_QUEUE)]
    pub queue: String,
}

/// The tasks of a queue in one state.
#[derive(Debug, Args)]
pub(crate) struct StateArgs {
    /// The state
    #[arg(long, value_parser = state_parser())]
    pub state: TaskState,
    /// The queue
    #[arg(long, default_value = DEFAULT_QUEUE)]
    pub queue: String,
}

/// `retry-queue queue …`.
#[derive(Debug, Subcommand)]
pub(crate) enum QueueCommand {
    /// Stop workers from claiming the queue's tasks (enqueueing still works)
    Pause {
        /// The queue
        name: String,
    },
    /// Let workers claim the queue's tasks again
    Unpause {
        /// The queue
        name: String,
    },
}

/// The `--state` values: the names of [`TaskState`], each with its help line.
fn state_parser() -> impl TypedValueParser<Value = TaskState> {
    let values = TaskState::ALL.map(|state| {
        let help = match state {
            TaskState::Pending => "Ready to run, waiting for a worker",
            TaskState::Scheduled => "Enqueued to run later",
            TaskState::Active => "Held by a worker",
            TaskState::Retry => "Failed; runs again at its next process time",
            TaskState::Archived => "Failed for good",
            TaskState::Completed => "Succeeded",
        };
        PossibleValue::new(state.as_str()).help(help)
    });
    PossibleValuesParser::new(values).try_map(|name| name.parse::<TaskState>())
}

/// `retry-queue migrate …`: the schema's versions. `up` and `down` are the only commands that
/// change the schema: every other one opens the database without migrating it, and refuses a
/// database without the queue's schema (or behind this build's) with a message naming
/// `retry-queue migrate up`.
#[derive(Debug, Subcommand)]
pub(crate) enum MigrateCommand {
    /// Every version this build knows and the database has: applied, pending, or newer; and
    /// whether this build runs on the database as it is
    Status,
    /// Apply every pending version, in one transaction under the schema's lock
    Up,
    /// Revert the versions above N, newest first, in one transaction (N = 0 removes every
    /// table of the task queue, tasks included)
    Down {
        /// The version to go back to
        #[arg(long, value_name = "N")]
        to: u32,
    },
}
