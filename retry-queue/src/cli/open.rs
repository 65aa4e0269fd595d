//! Opening the database and the queue a command names.

use retry_runtime::durable::Queue;

use super::failure::{Failure, failure};
use super::table::clean;

/// Opens the database at `url` without changing its schema: only `migrate up|down` does (a
/// worker migrates on connect). A SQLite file that does not exist is an error (an inspector
/// with a mistyped path must not create an empty database and report it empty), and so is a
/// database without the queue's schema, or behind this build's ("run `retry-queue migrate
/// up`"), or with a `retry_*` table that is not the queue's (named): pointed at another
/// application's database, `stats` must not create tables in it.
pub(super) async fn connect(url: &str) -> Result<Queue, Failure> {
    existing(url)?;
    Ok(Queue::builder(url).migrate(false).connect().await?)
}

/// Refuses a `sqlite:` URL whose file does not exist.
pub(super) fn existing(url: &str) -> Result<(), Failure> {
    if let Some(path) = sqlite_path(url)
        && !std::path::Path::new(path).exists()
    {
        return Err(Failure::Message(format!(
            "no SQLite database at \"{}\" (retry-queue opens an existing file, it does not \
             create one)",
            clean(path)
        )));
    }
    Ok(())
}

/// The file of a `sqlite:` URL (`sqlite://tasks.db`, `sqlite:///abs/tasks.db`, `sqlite:tasks.db`,
/// options after `?` ignored); `None` for another scheme or an in-memory database.
fn sqlite_path(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("sqlite:")?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let path = rest.split('?').next().unwrap_or(rest);
    (!path.is_empty() && path != ":memory:").then_some(path)
}

/// The queue `name` of the database `base` is connected to.
pub(super) fn named(base: &Queue, name: &str) -> Result<Queue, Failure> {
    base.clone()
        .try_named(name)
        .map_err(|e| failure(e, base, None))
}

#[cfg(test)]
mod tests {
    use super::sqlite_path;

    #[test]
    fn sqlite_paths_are_read_from_the_url() {
        assert_eq!(sqlite_path("sqlite://tasks.db"), Some("tasks.db"));
        assert_eq!(
            sqlite_path("sqlite:///var/t.db?mode=rwc"),
            Some("/var/t.db")
        );
        assert_eq!(sqlite_path("sqlite:tasks.db"), Some("tasks.db"));
        assert_eq!(sqlite_path("sqlite::memory:"), None);
        assert_eq!(sqlite_path("postgres://h/db"), None);
    }
}
