//! The shared types at the bottom of `durable/` (River's `rivertype`): what the store reads
//! and writes, the client returns, the worker runs and the inspector shows, so that none of
//! those layers imports another for a type. Nothing here names a layer above it: the modules
//! below `types/` are the bottom files (`state.rs`, `error.rs`, `clock.rs`, `failures.rs`,
//! `traceparent.rs`).
//!
//! - [`task`]: a task as stored ([`TaskInfo`](task::TaskInfo)).
//! - [`active`]: a claimed task, as its handler gets it ([`ActiveTask`](active::ActiveTask)).
//! - [`archive`]: why a task was archived ([`ArchiveReason`](archive::ArchiveReason)).
//! - [`presence`]: the records of live workers and scheduler entries, which the heartbeat
//!   writes and the inspector reads.
//! - [`defaults`]: every `DEFAULT_*` of the tier, each with its reason.
//! - [`kinds`]: the task kinds a claim takes, a typed list down to the store.
//!
//! [`TaskState`](crate::durable::TaskState) is the shared type below these (`durable/state.rs`):
//! the queue's [`Error`](crate::durable::Error) names a task's state, and an
//! [`ActiveTask`](active::ActiveTask) decodes its payload into that error, so the states sit
//! below the errors and the errors below these types.

pub(crate) mod active;
pub(crate) mod archive;
pub(crate) mod defaults;
pub(crate) mod kinds;
pub(crate) mod presence;
pub(crate) mod task;
