//! Which file a SQLite database's path named when the queue connected (device and inode): a
//! path that names another file, or none, now means the file was replaced or deleted under the
//! process, which goes on reading and writing the old one, seen by nothing else (issue 41,
//! item 5). The worker's heartbeat checks it once a beat ([`FileIdentity::check`]); the
//! [`Inspector`](crate::durable::Inspector) before each call, at most once a second
//! ([`WatchedFile`]).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::durable::error::Error;
use crate::durable::store::backend::Backend as _;
use crate::durable::store::{Store, on_backend};

/// The file a SQLite database's path named: its path, device and inode.
#[derive(Clone, Debug)]
pub(crate) struct FileIdentity {
    path: PathBuf,
    id: (u64, u64),
}

impl FileIdentity {
    /// The file behind `store` now; `None` for PostgreSQL, an in-memory database, or a file
    /// that cannot be looked at.
    pub(crate) fn of(store: &Store) -> Option<FileIdentity> {
        let path = on_backend!(store, pool => pool.file())?;
        let id = file_id(&path)?.ok()?;
        Some(FileIdentity { path, id })
    }

    /// `Err` when the path no longer names the file: none (deleted), or another one
    /// (replaced). A path that cannot be looked at now (a disk fault) is no verdict: the
    /// worker's outage watch sees to that.
    pub(crate) fn check(&self) -> Result<(), Error> {
        match self.lost() {
            None => Ok(()),
            Some(deleted) => Err(self.lost_error(deleted)),
        }
    }

    /// `Some(deleted)` when the file was deleted (`true`) or replaced (`false`).
    fn lost(&self) -> Option<bool> {
        match file_id(&self.path)? {
            Ok(id) if id == self.id => None,
            Ok(_) => Some(false),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(true),
            Err(_) => None,
        }
    }

    fn lost_error(&self, deleted: bool) -> Error {
        Error::DatabaseFileLost {
            path: self.path.clone(),
            deleted,
        }
    }
}

/// How often a [`WatchedFile`] looks at its path, at most.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// A [`FileIdentity`] checked at most once a second ([`LOOK_EVERY`]), for calls that come
/// many a second (a dashboard's): between two looks, the last verdict.
#[derive(Debug)]
pub(crate) struct WatchedFile {
    identity: FileIdentity,
    /// When the path was last looked at, and what was found: `Some(deleted)` once lost.
    last: Mutex<Option<(Instant, Option<bool>)>>,
}

impl WatchedFile {
    /// The file behind `store` now, to watch; `None` where [`FileIdentity::of`] is.
    pub(crate) fn of(store: &Store) -> Option<WatchedFile> {
        Some(WatchedFile {
            identity: FileIdentity::of(store)?,
            last: Mutex::new(None),
        })
    }

    /// The identity recorded when the queue connected.
    pub(crate) fn identity(&self) -> &FileIdentity {
        &self.identity
    }

    /// [`FileIdentity::check`], at most once a second: [`Error::DatabaseFileLost`] once the
    /// path names another file or none.
    pub(crate) fn check(&self) -> Result<(), Error> {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let lost = match *last {
            Some((at, lost)) if now.duration_since(at) < LOOK_EVERY => lost,
            _ => {
                let lost = self.identity.lost();
                *last = Some((now, lost));
                lost
            }
        };
        drop(last);
        match lost {
            None => Ok(()),
            Some(deleted) => Err(self.identity.lost_error(deleted)),
        }
    }
}

/// A file's device and inode; `None` on a platform without them.
fn file_id(path: &Path) -> Option<std::io::Result<(u64, u64)>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        Some(std::fs::metadata(path).map(|meta| (meta.dev(), meta.ino())))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}
