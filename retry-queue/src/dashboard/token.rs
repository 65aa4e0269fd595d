//! Where the dashboard's token comes from: `--token-file PATH`, the environment variable
//! [`TOKEN_ENV`], or `--token T` (which every user of the machine can read in `ps`, so the
//! other two are the ones to use). The token is trimmed of surrounding whitespace (a file
//! usually ends with a newline) and must have at least [`MIN_TOKEN_LEN`] characters.

use std::path::Path;

use super::DashError;

/// The environment variable holding the token: `RETRY_QUEUE_TOKEN`.
pub const TOKEN_ENV: &str = "RETRY_QUEUE_TOKEN";

/// The shortest token accepted, in characters (after trimming): 16.
pub const MIN_TOKEN_LEN: usize = 16;

/// The token given on the command line, from its possible sources.
///
/// Precedence: a flag (`--token-file PATH` or `--token T`) wins over the environment variable
/// [`TOKEN_ENV`] (`env`: its value, `None` when unset; an empty value counts as unset); both
/// flags at once are refused ([`DashError::TokenSources`]), as they are a mistake. The token
/// read is trimmed of surrounding whitespace; its length is checked by
/// [`DashOptions::check`](super::DashOptions::check), not here.
///
/// Fails with [`DashError::TokenFile`] when the file cannot be read as UTF-8 text.
pub fn token_from(
    flag: Option<String>,
    file: Option<&Path>,
    env: Option<String>,
) -> Result<Option<String>, DashError> {
    let token = match (flag, file) {
        (Some(_), Some(_)) => return Err(DashError::TokenSources),
        (Some(token), None) => token,
        (None, Some(path)) => {
            std::fs::read_to_string(path).map_err(|source| DashError::TokenFile {
                path: path.to_path_buf(),
                source,
            })?
        }
        (None, None) => match env {
            Some(token) if !token.is_empty() => token,
            _ => return Ok(None),
        },
    };
    Ok(Some(token.trim().to_owned()))
}

/// The value of [`TOKEN_ENV`], `None` when unset; an error when it is not UTF-8.
pub fn token_env() -> Result<Option<String>, DashError> {
    match std::env::var(TOKEN_ENV) {
        Ok(value) => Ok(Some(value)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(DashError::TokenNotUnicode),
    }
}

/// Refuses a blank token, and one shorter than [`MIN_TOKEN_LEN`] once trimmed.
pub(super) fn check_token(token: &str) -> Result<(), DashError> {
    let token = token.trim();
    if token.is_empty() {
        return Err(DashError::BlankToken);
    }
    let len = token.chars().count();
    if len < MIN_TOKEN_LEN {
        return Err(DashError::ShortToken { len });
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
        assert_eq!(token_from(None, None, Some(String::new())).unwrap(), None);
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
    fn short_and_blank_tokens_are_refused() {
        assert!(matches!(check_token(" \n"), Err(DashError::BlankToken)));
        assert!(matches!(
            check_token("  fifteen-chars-x  "),
            Err(DashError::ShortToken { len: 15 })
        ));
        assert!(check_token("sixteen-chars-ok").is_ok());
        // Characters, not bytes.
        assert!(matches!(
            check_token("ééééééééééééééé"),
            Err(DashError::ShortToken { len: 15 })
        ));
    }
}
