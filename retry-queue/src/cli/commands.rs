//! Running each command against the queue's database, and what it prints.

use std::io::Write;

use retry_runtime::durable::{Cursor, Error, Queue, TaskInfo, TaskQuery, TaskState, rfc3339};

use super::failure::{Failure, failure};
use super::open::{connect, named};
use super::output::{Output, task_table};
use super::table::{Align, Table, age, clean};
use super::{Cli, Command, QueueCommand, StateArgs, TaskCommand, TaskId};
use crate::dashboard::{self, DashOptions};
use crate::json;
use crate::ops::{Action, Bulk};

pub(super) async fn run(cli: Cli, out: &mut impl Write) -> Result<(), Failure> {
    if let Command::Dash {
        listen,
        read_only,
        token,
        token_file,
    } = cli.command
    {
        let dash_failure = |e: dashboard::DashError| Failure::Message(e.to_string());
        let token = dashboard::token_from(
            token,
            token_file.as_deref(),
            dashboard::token_env().map_err(dash_failure)?,
        )
        .map_err(dash_failure)?;
        let options = DashOptions {
            listen,
            read_only,
            token,
            ..DashOptions::default()
        };
        // Refuse before touching the database.
        options.check().map_err(dash_failure)?;
        let queue = connect(&cli.db).await?;
        // Bound before the URL is printed: a port in use is an error, not a URL that answers
        // nothing (or another program).
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|source| dash_failure(dashboard::DashError::Bind { listen, source }))?;
        let bound = listener.local_addr()?;
        let mode = if read_only { " (read-only)" } else { "" };
        writeln!(out, "dashboard on http://{bound}/{mode}")?;
        out.flush()?;
        return dashboard::serve_on(listener, queue, options)
            .await
            .map_err(|e| Failure::Message(e.to_string()));
    }
    let output = Output {
        json: cli.json,
        out,
    };
    if let Command::Migrate(command) = cli.command {
        return super::migrate::run(&cli.db, command, output).await;
    }
    let base = connect(&cli.db).await?;
    match cli.command {
        Command::Stats => stats(&base, output).await,
        Command::Task(command) => task(&base, command, output).await,
        Command::Queue(QueueCommand::Pause { name }) => pause(&base, &name, true, output).await,
        Command::Queue(QueueCommand::Unpause { name }) => pause(&base, &name, false, output).await,
        Command::Errors { state, queue } => {
            let queue = named(&base, &queue)?;
            super::errors::print(&queue, state, output).await
        }
        Command::History { hours, days, queue } => {
            super::history::print(&named(&base, &queue)?, hours, days, output).await
        }
        Command::Workers => super::presence::workers(&base, output).await,
        Command::Systems { queue } => super::systems::print(&named(&base, &queue)?, output).await,
        Command::Schedulers => super::presence::schedulers(&base, output).await,
        Command::Dash { .. } | Command::Migrate(_) => unreachable!("handled above"),
    }
}

async fn stats<W: Write>(base: &Queue, output: Output<'_, W>) -> Result<(), Failure> {
    let inspector = base.inspector();
    let stats = inspector
        .stats()
        .await
        .map_err(|e| failure(e, base, None))?;
    let workers = inspector
        .workers()
        .await
        .map_err(|e| failure(e, base, None))?;
    let now = base.now();
    let figures = json::figures(base, &stats, &workers)
        .await
        .map_err(|e| failure(e, base, None))?;
    output.print(
        || json::overview(now, figures),
        |out| {
            let mut table = Table::new(&[
                ("QUEUE", Align::Left),
                ("PENDING", Align::Right),
                ("SCHEDULED", Align::Right),
                ("ACTIVE", Align::Right),
                ("RETRY", Align::Right),
                ("ARCHIVED", Align::Right),
                ("COMPLETED", Align::Right),
                ("PAUSED", Align::Left),
                ("PROCESSED TODAY", Align::Right),
                ("FAILED TODAY", Align::Right),
                ("OLDEST PENDING", Align::Right),
                ("WORKERS", Align::Right),
            ]);
            for s in &stats {
                let mut row = vec![clean(&s.queue)];
                row.extend(TaskState::ALL.map(|state| s.count(state).to_string()));
                row.push(if s.paused { "yes" } else { "no" }.to_owned());
                row.push(s.processed_today.to_string());
                row.push(s.failed_today.to_string());
                row.push(s.oldest_pending_age.map_or_else(|| "-".to_owned(), age));
                row.push(
                    workers
                        .iter()
                        .filter(|w| w.serves(&s.queue))
                        .count()
                        .to_string(),
                );
                table.row(row);
            }
            table.write(out)
        },
    )
}

async fn task<W: Write>(
    base: &Queue,
    command: TaskCommand,
    output: Output<'_, W>,
) -> Result<(), Failure> {
    match command {
        TaskCommand::Ls {
            state,
            queue,
            page,
            after,
            size,
            kind,
            search,
        } => {
            let queue = named(base, &queue)?;
            let after = after
                .map(|text| text.parse::<Cursor>())
                .transpose()
                .map_err(|e| failure(e, &queue, None))?;
            if kind.is_some() || search.is_some() {
                let query = super::find::query(state, kind, search, after, size);
                return super::find::ls(&queue, query, output).await;
            }
            let at = match after {
                Some(cursor) => At::After(cursor),
                None => At::Page(page),
            };
            ls(&queue, state, at, size, output).await
        }
        TaskCommand::Kinds(StateArgs { state, queue }) => {
            super::find::kinds(&named(base, &queue)?, state, output).await
        }
        TaskCommand::Batch { action, ids, queue } => {
            super::find::batch(&named(base, &queue)?, &action, &ids, output).await
        }
        TaskCommand::Show(TaskId { id, queue }) => {
            let queue = named(base, &queue)?;
            let info = queue
                .inspector()
                .get(&id)
                .await
                .map_err(|e| failure(e, &queue, Some(&id)))?
                .ok_or_else(|| failure(Error::TaskNotFound, &queue, Some(&id)))?;
            output.print(|| json::task(&info), |out| show(&info, out))
        }
        TaskCommand::Run(task) => action(base, task, Action::Run, output).await,
        TaskCommand::Delete(task) => action(base, task, Action::Delete, output).await,
        TaskCommand::Archive(task) => action(base, task, Action::Archive, output).await,
        TaskCommand::Cancel(task) => action(base, task, Action::Cancel, output).await,
        TaskCommand::RunAll(args) => bulk(base, args, Bulk::RunAll, output).await,
        TaskCommand::DeleteAll(args) => bulk(base, args, Bulk::DeleteAll, output).await,
    }
}

/// Where `task ls` starts: a page number, or after a cursor.
#[derive(Clone, Copy)]
enum At {
    Page(u32),
    After(Cursor),
}

async fn ls<W: Write>(
    queue: &Queue,
    state: TaskState,
    at: At,
    size: u32,
    output: Output<'_, W>,
) -> Result<(), Failure> {
    let fail = |e| failure(e, queue, None);
    let inspector = queue.inspector();
    let query = TaskQuery::new(state).size(size);
    let query = match at {
        At::Page(page) => query.page(page),
        At::After(cursor) => query.after(cursor),
    };
    let listed = inspector.tasks(query).await.map_err(fail)?;
    let (tasks, next) = (&listed.tasks, listed.next);
    let total = inspector.count(state).await.map_err(fail)?;
    let pages = total.div_ceil(u64::from(size)).max(1);
    output.print(
        || json::page(tasks, next, total, state),
        |out| {
            task_table(tasks, out)?;
            let (n, name) = (tasks.len(), clean(queue.name()));
            match at {
                At::Page(page) => writeln!(
                    out,
                    "page {page} of {pages}: {n} of {total} {state} tasks in queue \"{name}\""
                )?,
                At::After(_) => {
                    writeln!(out, "{n} of {total} {state} tasks in queue \"{name}\"")?;
                }
            }
            match next {
                Some(cursor) => writeln!(out, "next page: --after {cursor}"),
                None => Ok(()),
            }
        },
    )
}

/// `task show`: one `field: value` line per field of the task JSON, values aligned.
fn show(t: &TaskInfo, out: &mut impl Write) -> std::io::Result<()> {
    let time = |t: Option<std::time::SystemTime>| t.map_or_else(|| "-".to_owned(), rfc3339);
    let fields = [
        ("id", clean(&t.id)),
        ("queue", clean(&t.queue)),
        ("kind", clean(&t.kind)),
        (
            "system",
            t.system.as_deref().map_or_else(|| "-".to_owned(), clean),
        ),
        ("state", t.state.to_string()),
        (
            "archive_reason",
            t.archive_reason
                .map_or_else(|| "-".to_owned(), |reason| reason.to_string()),
        ),
        ("retried", format!("{}/{}", t.retried, t.max_retry)),
        ("enqueued_at", rfc3339(t.enqueued_at)),
        ("next_process_at", time(t.next_process_at)),
        ("last_failed_at", time(t.last_failed_at)),
        ("completed_at", time(t.completed_at)),
        ("lease_expires_at", time(t.lease_expires_at)),
        (
            "last_err",
            t.last_err.as_deref().map_or_else(|| "-".to_owned(), clean),
        ),
        ("payload", clean(&t.payload)),
        ("trace", t.trace_id().map_or_else(|| "-".to_owned(), clean)),
    ];
    for (name, value) in fields {
        writeln!(out, "{:<16} {value}", format!("{name}:"))?;
    }
    // The failure history, oldest first: one line per failed attempt.
    if t.errors.is_empty() {
        writeln!(out, "{:<16} -", "errors:")?;
    } else {
        writeln!(out, "errors:")?;
        for failed in &t.errors {
            writeln!(
                out,
                "  #{:<3} {}  {}",
                failed.retried,
                rfc3339(failed.at),
                clean(&failed.error)
            )?;
        }
    }
    Ok(())
}

async fn action<W: Write>(
    base: &Queue,
    TaskId { id, queue }: TaskId,
    action: Action,
    output: Output<'_, W>,
) -> Result<(), Failure> {
    let queue = named(base, &queue)?;
    action
        .apply(&queue.inspector(), &id)
        .await
        .map_err(|e| failure(e, &queue, Some(&id)))?;
    output.print(
        || json::acted(queue.name(), &id, action),
        |out| {
            writeln!(
                out,
                "task \"{}\" in queue \"{}\": {}",
                clean(&id),
                clean(queue.name()),
                action.done()
            )
        },
    )
}

async fn bulk<W: Write>(
    base: &Queue,
    StateArgs { state, queue }: StateArgs,
    bulk: Bulk,
    output: Output<'_, W>,
) -> Result<(), Failure> {
    let queue = named(base, &queue)?;
    let count = bulk
        .apply(&queue.inspector(), state)
        .await
        .map_err(|e| failure(e, &queue, None))?;
    let done = bulk.done();
    output.print(
        || json::bulk_done(queue.name(), state, count),
        |out| {
            writeln!(
                out,
                "{count} {state} tasks of queue \"{}\" {done}",
                clean(queue.name())
            )
        },
    )
}

async fn pause<W: Write>(
    base: &Queue,
    name: &str,
    paused: bool,
    output: Output<'_, W>,
) -> Result<(), Failure> {
    let queue = named(base, name)?;
    if paused {
        queue.inspector().pause().await
    } else {
        queue.inspector().unpause().await
    }
    .map_err(|e| failure(e, &queue, None))?;
    output.print(
        || json::paused(queue.name(), paused),
        |out| {
            let what = if paused { "paused" } else { "unpaused" };
            writeln!(out, "queue \"{}\" {what}", clean(queue.name()))
        },
    )
}
