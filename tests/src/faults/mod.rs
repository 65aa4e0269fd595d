//! The fault-injection harness: faults a production machine throws, on command, for any
//! durable test to use (issue 41). Each module is one kind of fault:
//!
//! - [`storage`]: a SQLite database whose files fail on command (I/O errors or a read-only
//!   file for a while, a full disk), and a database file deleted or replaced under a process.
//! - [`proxy`]: an in-test TCP proxy between a worker and PostgreSQL that cuts, delays or
//!   resets the connections on command.
//! - [`kill`]: worker processes killed (SIGKILL) at chosen points: holding prefetched tasks,
//!   mid-batch, mid-migration.
//!
//! The table of each fault, what the queue promises and the test that proves it is in
//! `docs/ARCHITECTURE.md` ("Faults and the tests that prove them").

pub mod kill;
pub mod proxy;
pub mod storage;
