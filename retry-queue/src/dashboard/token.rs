//! Where the dashboard's token comes from: `--token-file PATH`, the environment variable
//! [`TOKEN_ENV`], or `--token T` (which every user of the machine can read in `ps`, so the
//! other two are the ones to use). The token is trimmed of surrounding whitespace (a file
//! usually ends with a newline) and must have at least [`MIN_TOKEN_LEN`] characters, of which
//! at least [`MIN_TOKEN_DISTINCT`] different ones (`aaaaaaaaaaaaaaaa` is no secret). A token
//! file is read up to [`MAX_TOKEN_FILE_BYTES`] (`--token-file /dev/zero` is refused, not read
//! for ever); an empty [`TOKEN_ENV`] is a blank token, refused, not "no token".

use std::io::Read;
use std::path::Path;

use super::DashError;

pub use super::token_rules::{MAX_TOKEN_FILE_BYTES, MIN_TOKEN_DISTINCT, MIN_TOKEN_LEN, TOKEN_ENV};

/// The token given on the command line, from its possible sources.
///
/// Precedence: a flag (`--token-file PATH` or `--token T`) wins over the environment variable
/// [`TOKEN_ENV`] (`env`: its value, `None` when unset; an empty value is a blank token, which
/// [`DashOptions::check`](super::DashOptions::check) refuses, not "no token"); both flags at
/// once are refused ([`DashError::TokenSources`]), as they are a mistake. The token read is
/// trimmed of surrounding whitespace; its length is checked by
/// [`DashOptions::check`](super::DashOptions::check), not here.
///
/// Fails with [`DashError::TokenFile`] when the file cannot be read as UTF-8 text, and with
/// [`DashError::TokenFileTooLarge`] when it holds more than [`MAX_TOKEN_FILE_BYTES`].
pub(crate) fn token_from(
    flag: Option<String>,
    file: Option<&Path>,
    env: Option<String>,
) -> Result<Option<String>, DashError> {
    let token = match (flag, file) {
        (Some(_), Some(_)) => return Err(DashError::TokenSources),
        (Some(token), None) => token,
        (None, Some(path)) => read_bounded(path)?,
        (None, None) => match env {
            Some(token) => token,
            None => return Ok(None),
        },
    };
    Ok(Some(token.trim().to_owned()))
}

/// The text of the token file at `path`, read up to [`MAX_TOKEN_FILE_BYTES`]. Only a regular
/// file is opened: opening a FIFO waits for a writer (for ever, when none comes), and a
/// device like `/dev/zero` never ends.
fn read_bounded(path: &Path) -> Result<String, DashError> {
    let failed = |source| DashError::TokenFile {
        path: path.to_path_buf(),
        source,
    };
    let file_type = std::fs::metadata(path).map_err(failed)?.file_type();
    if !file_type.is_file() {
        return Err(DashError::TokenFileNotRegular {
            path: path.to_path_buf(),
            kind: kind_of(file_type),
        });
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_TOKEN_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(failed)?;
    if bytes.len() as u64 > MAX_TOKEN_FILE_BYTES {
        return Err(DashError::TokenFileTooLarge {
            path: path.to_path_buf(),
        });
    }
    String::from_utf8(bytes)
        .map_err(|e| failed(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// What a file that is not a regular one is, for the refusal.
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_char_device() || file_type.is_block_device() {
            return "a device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        return "a directory";
    }
    "not a file"
}

/// The value of [`TOKEN_ENV`], `None` when unset; an error when it is not UTF-8.
pub(crate) fn token_env() -> Result<Option<String>, DashError> {
    match std::env::var(TOKEN_ENV) {
        Ok(value) => Ok(Some(value)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(DashError::TokenNotUnicode),
    }
}

/// Refuses a blank token, one shorter than [`MIN_TOKEN_LEN`] once trimmed, one of fewer than
/// [`MIN_TOKEN_DISTINCT`] different characters, and one with a character other than printable
/// ASCII or space (a browser's `fetch` refuses such a header, and the server reads a header
/// that is not ASCII as no token: it could never match).
pub(super) fn check_token(token: &str) -> Result<(), DashError> {
    let token = token.trim();
    if token.is_empty() {
        return Err(DashError::BlankToken);
    }
    let len = token.chars().count();
    if len < MIN_TOKEN_LEN {
        return Err(DashError::ShortToken { len });
    }
    let mut chars: Vec<char> = token.chars().collect();
    chars.sort_unstable();
    chars.dedup();
    if chars.len() < MIN_TOKEN_DISTINCT {
        return Err(DashError::WeakToken {
            distinct: chars.len(),
        });
    }
    if let Some(found) = token.chars().find(|c| *c != ' ' && !c.is_ascii_graphic()) {
        return Err(DashError::TokenNotAscii { found });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_wins_over_the_environment_and_two_flags_are_refused() {
        let dir = std::env::temp_dir().join(format!("retry-queue-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "  from-the-file-0123456789\n").unwrap();
        assert_eq!(
            token_from(None, Some(&file), Some("from-env".into())).unwrap(),
            Some("from-the-file-0123456789".into())
        );
        assert_eq!(
            token_from(Some(" argv ".into()), None, Some("from-env".into())).unwrap(),
            Some("argv".into())
        );
        assert_eq!(
            token_from(None, None, Some("\tfrom-env\n".into())).unwrap(),
            Some("from-env".into())
        );
        // An empty variable is a blank token (refused at start), not "no token".
        assert_eq!(
            token_from(None, None, Some(String::new())).unwrap(),
            Some(String::new())
        );
        assert!(matches!(check_token(""), Err(DashError::BlankToken)));
        assert_eq!(token_from(None, None, None).unwrap(), None);
        assert!(matches!(
            token_from(Some("a".into()), Some(&file), None),
            Err(DashError::TokenSources)
        ));
        let missing = dir.join("missing");
        let e = token_from(None, Some(&missing), None).unwrap_err();
        assert!(matches!(e, DashError::TokenFile { .. }), "{e:?}");
        assert!(
            e.to_string().contains(&missing.display().to_string()),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_token_file_is_read_up_to_a_bound() {
        // An endless file: refused after reading the bound, not read for ever.
        // A device (endless) is refused unread, as any file that is not a regular one.
        let e = token_from(None, Some(Path::new("/dev/zero")), None).unwrap_err();
        assert!(
            matches!(
                e,
                DashError::TokenFileNotRegular {
                    kind: "a device",
                    ..
                }
            ),
            "{e:?}"
        );
        let dir = tempfile_dir("bound");
        let exact = dir.join("exact");
        let token = "x".repeat(MAX_TOKEN_FILE_BYTES as usize);
        std::fs::write(&exact, &token).unwrap();
        assert_eq!(token_from(None, Some(&exact), None).unwrap(), Some(token));
        let over = dir.join("over");
        std::fs::write(&over, "x".repeat(MAX_TOKEN_FILE_BYTES as usize + 1)).unwrap();
        assert!(matches!(
            token_from(None, Some(&over), None),
            Err(DashError::TokenFileTooLarge { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("retry-queue-token-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn short_and_blank_tokens_are_refused() {
        assert!(matches!(check_token(" \n"), Err(DashError::BlankToken)));
        assert!(matches!(
            check_token("  fifteen-chars-x  "),
            Err(DashError::ShortToken { len: 15 })
        ));
        assert!(check_token("sixteen-chars-ok").is_ok());
        // Long enough, but too few different characters.
        assert!(matches!(
            check_token("aaaaaaaaaaaaaaaa"),
            Err(DashError::WeakToken { distinct: 1 })
        ));
        assert!(matches!(
            check_token("abababababababababababab"),
            Err(DashError::WeakToken { distinct: 2 })
        ));
        assert!(matches!(
            check_token("abcdefgabcdefgabcdefg"),
            Err(DashError::WeakToken { distinct: 7 })
        ));
        assert!(check_token("abcdefghabcdefgh").is_ok());
        // Characters, not bytes.
        assert!(matches!(
            check_token("ééééééééééééééé"),
            Err(DashError::ShortToken { len: 15 })
        ));
        // Long and varied enough, but not ASCII: never sent as is by a browser.
        assert!(matches!(
            check_token("jeton-àéîõü-0123456789"),
            Err(DashError::TokenNotAscii { found: 'à' })
        ));
        assert!(matches!(
            check_token("tab\tinside-0123456789"),
            Err(DashError::TokenNotAscii { found: '\t' })
        ));
        assert!(check_token("with a space-0123456789").is_ok());
    }
}
