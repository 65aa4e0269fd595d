//! The operator's side of [`retry_runtime::durable`]: see and steer a durable task queue. What
//! a host application mounts: the web dashboard ([`dashboard::router`] in its axum server, or
//! [`dashboard::serve`] on its own) and the command line ([`main`], what the `retry-queue`
//! binary runs).
//!
//! The command line:
//!
//! ```text
//! retry-queue --db sqlite://tasks.db stats
//! retry-queue --db sqlite://tasks.db task ls --state retry [--queue q] [--page n] [--size n]
//! retry-queue --db sqlite://tasks.db task show ID [--queue q]
//! retry-queue --db sqlite://tasks.db task run|delete|archive ID [--queue q]
//! retry-queue --db sqlite://tasks.db task run-all|delete-all --state archived [--queue q]
//! retry-queue --db sqlite://tasks.db queue pause|unpause NAME
//! retry-queue --db sqlite://tasks.db errors [--state retry] [--queue q]
//! retry-queue --db sqlite://tasks.db workers
//! retry-queue --db sqlite://tasks.db schedulers
//! retry-queue --db sqlite://tasks.db dash [--listen 127.0.0.1:8080] [--read-only] [--token-file PATH]
//! ```
//!
//! `RETRY_QUEUE_DB` stands for `--db`. Every command prints a table (or a line) for people, or
//! with `--json` for scripts the same JSON as the dashboard's API (see [`dashboard`]). Exit
//! status: 0 on success, 1 when the command failed (an unknown id, a refused action, a
//! database that cannot be reached: one line `error: …` on stderr), 2 for a command line clap
//! rejects.
//!
//! The manual's chapters follow: the CLI, the dashboard and its API, metrics and alerts.
#![doc = ""]
#![doc = include_str!("../docs/cli.md")]
#![doc = ""]
#![doc = include_str!("../docs/dashboard.md")]
#![doc = ""]
#![doc = include_str!("../docs/metrics.md")]

mod cli;
pub mod dashboard;
mod json;
mod ops;

pub use cli::main;
