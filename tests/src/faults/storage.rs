//! Storage that fails on command, for any durable test on SQLite: a database's files made
//! unwritable for a while ([`Frozen`]), a full disk ([`SmallDisk`], [`DiskFiller`]), and the
//! database file deleted ([`delete`]) or replaced ([`replace`]) under a running process.
//!
//! Every fault that can be undone is a guard: dropping it (also while a failing test unwinds)
//! undoes the fault, so a test never leaves an immutable file or a mount behind.
//!
//! Most of these need root (`chattr`, `mount`): where the machine cannot inject a fault, the
//! constructor returns [`Unavailable`], and the test calls [`Unavailable::skip`], which says so
//! loudly on stderr and lets the test return without running.
//!
//! Why `chattr +i` and not `chmod`: root ignores permission bits, and a mode changes nothing for
//! a file descriptor that is already open. The immutable flag makes every write to the file fail
//! with `EPERM`, through descriptors opened before it too: SQLite sees an I/O error
//! (`SQLITE_IOERR`), the "disk write error" a failing disk or a read-only remount gives a
//! production machine.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why the machine cannot inject a fault (not root, no `chattr`, a file system that refuses
/// the flag, `mount` not permitted): the test that needed it does not run, and says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl Unavailable {
    /// Says on stderr, loudly, that `test` did NOT run and why (straight to stderr: the test
    /// harness hides what a passing test prints to stdout).
    pub fn skip(&self, test: &str) {
        let line = format!("*** SKIPPED: {test} did NOT run: {}\n", self.0);
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `Ok` when this process runs as root (effective uid 0, read from `/proc/self/status`), which
/// `chattr +i` and `mount` need.
pub fn require_root() -> Result<(), Unavailable> {
    let status = fs::read_to_string("/proc/self/status")
        .map_err(|e| Unavailable(format!("cannot read /proc/self/status: {e}")))?;
    // "Uid:\treal\teffective\tsaved\tfs"
    let effective = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1));
    match effective {
        Some("0") => Ok(()),
        Some(uid) => Err(Unavailable(format!(
            "needs root to inject storage faults (running as uid {uid})"
        ))),
        None => Err(Unavailable("no Uid line in /proc/self/status".into())),
    }
}

/// Runs `program args`; `Unavailable` with its stderr when it cannot start or fails.
fn run(program: &str, args: &[&str]) -> Result<(), Unavailable> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| Unavailable(format!("cannot run {program}: {e}")))?;
    if output.status.success() {
        return Ok(());
    }
    Err(Unavailable(format!(
        "{program} {} failed ({}): {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}

/// The files of a SQLite database in WAL mode: the database and its `-wal` and `-shm` beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteFiles {
    /// The database file itself.
    pub db: PathBuf,
}

impl SqliteFiles {
    /// The files of the database at `db`.
    pub fn new(db: impl Into<PathBuf>) -> Self {
        SqliteFiles { db: db.into() }
    }

    /// The files of the database a `sqlite://PATH` (or `sqlite:PATH`) URL names, without its
    /// `?options`.
    ///
    /// # Panics
    /// If `url` is not a SQLite URL naming a file.
    pub fn of_url(url: &str) -> Self {
        let path = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .unwrap_or_else(|| panic!("{url:?} is not a sqlite: URL"));
        let path = path.split('?').next().unwrap_or(path);
        assert!(
            !path.is_empty() && path != ":memory:",
            "{url:?} names no file"
        );
        SqliteFiles::new(path)
    }

    /// The write-ahead log, `DB-wal`: every commit writes it first.
    pub fn wal(&self) -> PathBuf {
        self.with_suffix("-wal")
    }

    /// The shared-memory index of the WAL, `DB-shm` (SQLite maps it; the locks live there).
    pub fn shm(&self) -> PathBuf {
        self.with_suffix("-shm")
    }

    fn with_suffix(&self, suffix: &str) -> PathBuf {
        let mut name = self.db.clone().into_os_string();
        name.push(suffix);
        PathBuf::from(name)
    }
}

/// Files made immutable (`chattr +i`): every write to them fails, also through descriptors
/// opened before (SQLite's "disk I/O error"). Dropping the guard (or [`Frozen::thaw`]) clears
/// the flag (`chattr -i`) on each of them.
#[must_use = "the files are writable again as soon as the guard is dropped"]
#[derive(Debug)]
pub struct Frozen {
    paths: Vec<PathBuf>,
}

impl Frozen {
    /// Makes each of `paths` immutable. Needs root and a file system with the flag (ext4, xfs,
    /// btrfs, tmpfs on Linux 6.0+). A path that does not exist is refused (a WAL that a
    /// checkpoint removed cannot fail). On an error, the files already frozen are thawed.
    pub fn files<P: AsRef<Path>>(paths: &[P]) -> Result<Frozen, Unavailable> {
        require_root()?;
        let mut frozen = Frozen { paths: Vec::new() };
        for path in paths {
            let path = path.as_ref();
            if !path.exists() {
                return Err(Unavailable(format!("{} does not exist", path.display())));
            }
            run("chattr", &["+i", &path.to_string_lossy()])?;
            frozen.paths.push(path.to_owned());
        }
        Ok(frozen)
    }

    /// Makes the database's WAL immutable: the probe of issue 41 (every commit fails; reads of
    /// what is committed still work).
    pub fn wal(files: &SqliteFiles) -> Result<Frozen, Unavailable> {
        Frozen::files(&[files.wal()])
    }

    /// Makes the database and its WAL immutable: no commit and no checkpoint succeed.
    pub fn db_and_wal(files: &SqliteFiles) -> Result<Frozen, Unavailable> {
        Frozen::files(&[files.db.clone(), files.wal()])
    }

    /// The files it froze.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Makes the files writable again, now (the same as dropping the guard).
    pub fn thaw(self) {
        drop(self);
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        for path in self.paths.drain(..) {
            // Never panic in a drop (it may run while a test unwinds): say what stayed frozen.
            if let Err(e) = run("chattr", &["-i", &path.to_string_lossy()]) {
                eprintln!(
                    "faults::storage: could not make {} writable again: {e}",
                    path.display()
                );
            }
        }
    }
}

/// A small file system of its own (`mount -t tmpfs -o size=…`) in a temporary directory, for a
/// database that can run out of space: [`SmallDisk::fill`] takes every free byte. Dropping it
/// unmounts it (lazily if a process still holds a file open there) and removes the directory.
#[must_use = "the mount is removed as soon as the guard is dropped"]
#[derive(Debug)]
pub struct SmallDisk {
    mount: PathBuf,
    // The mount point's parent: removed after the unmount.
    _dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts a tmpfs of `bytes` bytes (rounded up to whole pages by the kernel). Needs root.
    pub fn mount(bytes: u64) -> Result<SmallDisk, Unavailable> {
        require_root()?;
        let dir =
            tempfile::tempdir().map_err(|e| Unavailable(format!("no temporary directory: {e}")))?;
        let mount = dir.path().join("disk");
        fs::create_dir(&mount).map_err(|e| Unavailable(format!("mkdir: {e}")))?;
        let size = format!("size={bytes}");
        run(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &size,
                "tmpfs",
                &mount.to_string_lossy(),
            ],
        )?;
        Ok(SmallDisk { mount, _dir: dir })
    }

    /// The mount point: where the test puts its database.
    pub fn path(&self) -> &Path {
        &self.mount
    }

    /// Fills the disk: a file `fill` written until the file system says it is full (`ENOSPC`).
    /// The space comes back when the returned guard is dropped (or [`DiskFiller::free`]).
    ///
    /// # Panics
    /// On any error but a full disk.
    pub fn fill(&self) -> DiskFiller {
        let path = self.mount.join("fill");
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("create the filler file");
        let chunk = vec![0xA5u8; 64 * 1024];
        // Large writes first, then byte by byte: the last page is taken too. Bounded: a tmpfs
        // has at most its size to give.
        for size in [chunk.len(), 4096, 1] {
            loop {
                match file.write(&chunk[..size]) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
                    Err(e) if e.kind() == ErrorKind::StorageFull => break,
                    Err(e) => panic!("filling {}: {e}", path.display()),
                }
            }
        }
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        DiskFiller {
            path,
            written,
            _file: file,
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let mount = self.mount.to_string_lossy().into_owned();
        if run("umount", &[&mount]).is_err() {
            // A process of the test still has a file open there (a pool not yet closed): the
            // mount goes away when it closes it.
            if let Err(e) = run("umount", &["-l", &mount]) {
                eprintln!("faults::storage: could not unmount {mount}: {e}");
            }
        }
    }
}

/// The file that takes a [`SmallDisk`]'s free space; dropping it (or [`DiskFiller::free`])
/// deletes it, and the space is free again.
#[must_use = "the space comes back as soon as the guard is dropped"]
#[derive(Debug)]
pub struct DiskFiller {
    path: PathBuf,
    written: u64,
    _file: File,
}

impl DiskFiller {
    /// How many bytes it took.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Frees the space, now (the same as dropping the guard).
    pub fn free(self) {
        drop(self);
    }
}

impl Drop for DiskFiller {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_file(&self.path) {
            eprintln!(
                "faults::storage: could not free {}: {e}",
                self.path.display()
            );
        }
    }
}

/// Deletes the database file under whatever process has it open (its `-wal` and `-shm` stay):
/// the process's descriptor still reaches the deleted file, and nothing it writes can be seen
/// at the path again. Cannot be undone. Needs no root.
///
/// # Panics
/// If the file cannot be removed.
pub fn delete(files: &SqliteFiles) {
    fs::remove_file(&files.db).unwrap_or_else(|e| panic!("deleting {}: {e}", files.db.display()));
}

/// Replaces the database file by `other` (`rename(other, db)`, atomic, as a restore from a
/// backup does): a process that had the old file open still writes to it, while new
/// connections open `other`. Both must be on the same file system. The old file's `-wal` and
/// `-shm` stay at their paths, as they would: a connection that opens the path now reads the
/// new file through the old WAL (SQLite cannot tell), so what it sees is no proof of what the
/// new file holds. Cannot be undone. Needs no root.
///
/// # Panics
/// If the rename fails.
pub fn replace(files: &SqliteFiles, other: &Path) {
    fs::rename(other, &files.db).unwrap_or_else(|e| {
        panic!(
            "renaming {} over {}: {e}",
            other.display(),
            files.db.display()
        )
    });
}
