//! The command line of `retry-queue`: its arguments ([`Cli`], parsed with clap) and
//! [`main`], which runs them.
//!
//! ```text
//! retry-queue --db sqlite://tasks.db stats
//! retry-queue --db sqlite://tasks.db task ls --state retry [--queue q] [--page n | --after CURSOR] [--size n]
//! retry-queue --db sqlite://tasks.db task ls --state retry [--kind K] [--search TEXT] [--after CURSOR]
//! retry-queue --db sqlite://tasks.db task kinds --state retry [--queue q]
//! retry-queue --db sqlite://tasks.db task batch run|delete|archive|cancel ID… [--queue q]
//! retry-queue --db sqlite://tasks.db task show ID [--queue q]
//! retry-queue --db sqlite://tasks.db task run|delete|archive ID [--queue q]
//! retry-queue --db sqlite://tasks.db task run-all|delete-all --state archived [--queue q]
//! retry-queue --db sqlite://tasks.db queue pause|unpause NAME
//! retry-queue --db sqlite://tasks.db errors [--state retry] [--queue q]
//! retry-queue --db sqlite://tasks.db history [--hours 24 | --days n] [--queue q]
//! retry-queue --db sqlite://tasks.db workers
//! retry-queue --db sqlite://tasks.db systems --queue default
//! retry-queue --db sqlite://tasks.db schedulers
//! retry-queue --db sqlite://tasks.db migrate status|up|down --to N
//! retry-queue --db sqlite://tasks.db dash [--listen 127.0.0.1:8080] [--read-only] [--token-file PATH]
//! ```
//!
//! `RETRY_QUEUE_DB` stands for `--db`; `RETRY_QUEUE_TOKEN` for the dashboard's token (see
//! `dash`: `--token-file PATH` or this variable, rather than `--token T`, which `ps` shows). Every command prints a table (or a line) for people, or
//! with `--json` the JSON of the crate's JSON module for scripts. Exit status: 0 on success, 1 when the
//! command failed (an unknown id, a refused action, a database that cannot be reached: one
//! line `error: …` on stderr), 2 for a command line clap rejects.
//!
//! Only `migrate up|down` changes the schema. Every other command opens the database without
//! migrating (a worker migrates on connect; an inspector pointed at another application's
//! database must not create tables in it): a database without the queue's schema, or behind
//! this build's, is refused with a message naming `retry-queue migrate up`, and a `retry_*`
//! table that is not the queue's with one naming it.

mod args;
mod commands;
mod errors;
mod failure;
mod find;
mod history;
mod migrate;
mod open;
mod output;
mod presence;
mod systems;
mod table;

use std::process::ExitCode;

use clap::Parser as _;

pub(crate) use args::{Cli, Command, MigrateCommand, QueueCommand, StateArgs, TaskCommand, TaskId};

/// Parses the command line, runs the command, prints its output on stdout and a failure as
/// one `error: …` line on stderr; returns the exit status (0, 1, or clap's 2).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    let mut stdout = std::io::stdout().lock();
    match runtime.block_on(commands::run(cli, &mut stdout)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure::Failure::ClosedOutput) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}
