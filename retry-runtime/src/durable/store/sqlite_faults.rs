//! What a SQLite error says about the storage under it: read by the statement runners of
//! `db` and `batch`, which close a connection a storage fault may
//! have left unusable.

/// Whether `e` is SQLite refusing a write because the connection is read-only (8 and its
/// extended codes).
pub(crate) fn is_read_only(e: &sqlx::Error) -> bool {
    sqlite_code(e).is_some_and(|code| code & 0xff == 8)
}

/// The (extended) result code of a SQLite error.
fn sqlite_code(e: &sqlx::Error) -> Option<i32> {
    let sqlx::Error::Database(db) = e else {
        return None;
    };
    db.try_downcast_ref::<sqlx::sqlite::SqliteError>()?;
    db.code().and_then(|code| code.parse::<i32>().ok())
}

/// Whether `e` is SQLite failing at the storage itself, which can leave the connection unusable
/// after the storage is back: an I/O error (10), a full disk (13), a file read-only to it (8: a
/// connection that opened its WAL while the file could not be written stays read-only), one
/// that cannot be opened (14), or that is no database or damaged (26, 11). Extended codes
/// included.
pub(crate) fn is_storage_fault(e: &sqlx::Error) -> bool {
    sqlite_code(e).is_some_and(|code| matches!(code & 0xff, 8 | 10 | 11 | 13 | 14 | 26))
}
