//! The versioned schema of a task database: which numbered migrations are applied, and the
//! operator's `up` and `down`. [`Queue::connect`](super::Queue::connect) applies what is
//! pending unless told not to ([`Connect::migrate`](super::Connect::migrate)); `retry-queue
//! migrate status|up|down --to N` runs these.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::error::Error;
use super::store::{Store, migrator};

/// The schema version this build of retry-runtime writes and reads.
pub fn latest_version() -> u32 {
    u32::try_from(LATEST).unwrap_or(u32::MAX)
}

#[cfg(feature = "sqlite")]
const LATEST: usize = super::store::migrations::SQLITE.len();
#[cfg(all(feature = "postgres", not(feature = "sqlite")))]
const LATEST: usize = super::store::migrations::POSTGRES.len();

/// A task database's schema, opened without changing it ([`Schema::connect`]) or taken from
/// an open queue ([`Queue::schema`](super::Queue::schema)).
#[derive(Clone, Debug)]
pub struct Schema {
    pub(crate) store: Store,
}

/// Where a database's schema stands against this build ([`Schema::status`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SchemaStatus {
    /// The highest version applied (0: none, or a database made before versions were
    /// recorded).
    pub version: u32,
    /// The highest version this build knows.
    pub latest: u32,
    /// Every version this build knows, then every newer one the database has, in order.
    pub migrations: Vec<MigrationStatus>,
    /// Why this build refuses to run on the database as it is, if it does: the error
    /// [`Queue::connect`](super::Queue::connect) would give without migrating.
    pub refused: Option<String>,
}

/// One version of the schema and whether the database has it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MigrationStatus {
    /// 1, 2, …
    pub version: u32,
    /// What it does, in a word or two (`baseline`).
    pub name: String,
    /// Applied or not, and how it compares to this build's.
    pub state: MigrationState,
    /// When it was applied.
    pub applied_at: Option<SystemTime>,
}

/// How a version stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MigrationState {
    /// Applied, from the same text as this build's.
    Applied,
    /// Known to this build, not applied: `up` applies it.
    Pending,
    /// Applied from a text that differs from this build's (its checksum differs).
    Changed,
    /// Applied by a newer build. `usable`: whether this build can run on a schema that has
    /// it (a change that only adds, during a rolling upgrade).
    Newer {
        /// Whether this build keeps working with it applied.
        usable: bool,
    },
}

impl Schema {
    /// Opens the database at `url` (the URLs of [`Queue::connect`](super::Queue::connect))
    /// without reading or changing its schema.
    pub async fn connect(url: &str) -> Result<Schema, Error> {
        Ok(Schema {
            store: Store::open(url).await?,
        })
    }

    /// What is applied, what is pending, and whether this build can run on it. Reads
    /// `retry_migrations` only: as fast on a table of a million tasks as on an empty one.
    pub async fn status(&self) -> Result<SchemaStatus, Error> {
        let known = migrator::known(&self.store);
        let applied = migrator::applied(&self.store).await?;
        let latest = known.last().map_or(0, |m| m.version);
        let mut migrations: Vec<MigrationStatus> = known
            .iter()
            .map(|m| {
                let row = applied.iter().find(|a| a.0 == m.version);
                MigrationStatus {
                    version: version(m.version),
                    name: m.name.to_owned(),
                    state: match row {
                        None => MigrationState::Pending,
                        Some(a) if a.2 == m.checksum() => MigrationState::Applied,
                        Some(_) => MigrationState::Changed,
                    },
                    applied_at: row.map(|a| at(a.4)),
                }
            })
            .collect();
        migrations.extend(
            applied
                .iter()
                .filter(|a| a.0 > latest)
                .map(|a| MigrationStatus {
                    version: version(a.0),
                    name: a.1.clone(),
                    state: MigrationState::Newer {
                        usable: a.3 <= latest,
                    },
                    applied_at: Some(at(a.4)),
                }),
        );
        let pending = migrations
            .iter()
            .any(|m| m.state == MigrationState::Pending);
        let refused = match migrator::usable(known, &applied) {
            Err(e) => Some(e.to_string()),
            Ok(()) if pending => Some(format!(
                "version {latest} is not applied: run `retry-queue migrate up`"
            )),
            Ok(()) => None,
        };
        Ok(SchemaStatus {
            version: version(applied.last().map_or(0, |a| a.0)),
            latest: version(latest),
            migrations,
            refused,
        })
    }

    /// Applies every pending version, in one transaction under the schema's lock; returns the
    /// versions applied (none when current). A database made before versions were recorded is
    /// adopted in place.
    pub async fn up(&self) -> Result<Vec<u32>, Error> {
        let applied = migrator::up(&self.store, None).await?;
        Ok(applied.into_iter().map(version).collect())
    }

    /// Reverts the applied versions above `to`, newest first, in one transaction; returns
    /// them. `down(0)` removes every table of the queue, tasks included. A version applied by
    /// a newer build is refused: only that build knows how to revert it.
    pub async fn down(&self, to: u32) -> Result<Vec<u32>, Error> {
        let reverted = migrator::down(&self.store, i64::from(to)).await?;
        Ok(reverted.into_iter().map(version).collect())
    }

    /// Closes the connections.
    pub async fn close(&self) {
        self.store.close().await;
    }
}

fn version(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn at(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}
