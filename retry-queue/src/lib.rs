//! The operator's side of [`retry_runtime::durable`]: see and steer a durable task queue.
//!
//! - The binary `retry-queue` (module [`cli`]): `retry-queue --db URL stats`, `task ls`,
//!   `task show`, `task run|delete|archive`, `task run-all|delete-all`, `queue pause|unpause`,
//!   `errors`, and `dash`, the web dashboard. Tables for people, `--json` for scripts.
//! - [`dashboard`]: the web dashboard, to run on its own ([`dashboard::serve`]) or to mount in
//!   an application's axum server ([`dashboard::router`]).
//! - [`json`]: the JSON of tasks, queues and error groups, one definition for the CLI's
//!   `--json` and the dashboard's API.

pub mod cli;
pub mod dashboard;
pub mod json;
