//! Why [`serve`](super::serve) did not start or stopped: a bottom-layer file that the options'
//! checks and the token's read both return.

use std::fmt;
use std::net::SocketAddr;

use super::token_rules::{MAX_TOKEN_FILE_BYTES, MIN_TOKEN_DISTINCT, MIN_TOKEN_LEN, TOKEN_ENV};

/// Why [`serve`](super::serve) did not start or stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum DashError {
    /// `listen` is not a loopback address and no token was given.
    TokenRequired {
        /// The address asked for.
        listen: SocketAddr,
    },
    /// The token is empty or only spaces.
    BlankToken,
    /// The token, trimmed, is shorter than [`MIN_TOKEN_LEN`] characters.
    ShortToken {
        /// Its length in characters.
        len: usize,
    },
    /// The token has fewer than [`MIN_TOKEN_DISTINCT`] different characters.
    WeakToken {
        /// How many different characters it has.
        distinct: usize,
    },
    /// The token file holds more than [`MAX_TOKEN_FILE_BYTES`] bytes.
    TokenFileTooLarge {
        /// The file named.
        path: std::path::PathBuf,
    },
    /// Both `--token` and `--token-file` were given.
    TokenSources,
    /// The token file could not be read.
    TokenFile {
        /// The file named.
        path: std::path::PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// [`TOKEN_ENV`] is set to something that is not UTF-8.
    TokenNotUnicode,
    /// The token has a character other than printable ASCII (and space): a browser cannot
    /// send it in the `Authorization` header, so it could never match.
    TokenNotAscii {
        /// The first such character.
        found: char,
    },
    /// The token file is not a regular file (a FIFO, a device, a directory, a socket): read,
    /// it could block start-up for ever or never end.
    TokenFileNotRegular {
        /// The file named.
        path: std::path::PathBuf,
        /// What it is: `"a FIFO"`, `"a directory"`, ….
        kind: &'static str,
    },
    /// The address could not be bound (in use, not allowed).
    Bind {
        /// The address asked for.
        listen: SocketAddr,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The server failed while running.
    Serve(std::io::Error),
}

impl fmt::Display for DashError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DashError::TokenRequired { listen } => write!(
                f,
                "refusing to listen on {listen} without a token: anyone who reaches that \
                 address could read and change the queue; give a token (--token-file PATH or \
                 RETRY_QUEUE_TOKEN; every request then needs `Authorization: Bearer T`) or \
                 listen on 127.0.0.1"
            ),
            DashError::BlankToken => f.write_str("the dashboard's token is blank"),
            DashError::ShortToken { len } => write!(
                f,
                "the dashboard's token has {len} characters: it needs at least {MIN_TOKEN_LEN} \
                 (surrounding whitespace does not count); `openssl rand -hex 16` makes one"
            ),
            DashError::WeakToken { distinct } => write!(
                f,
                "the dashboard's token has only {distinct} different characters: it needs at \
                 least {MIN_TOKEN_DISTINCT}; `openssl rand -hex 16` makes one"
            ),
            DashError::TokenFileTooLarge { path } => write!(
                f,
                "the token file {} holds more than {MAX_TOKEN_FILE_BYTES} bytes: it should hold \
                 the token alone",
                path.display()
            ),
            DashError::TokenSources => f.write_str(
                "give the token one way: --token-file PATH or --token T, not both \
                 (RETRY_QUEUE_TOKEN is used when neither is given)",
            ),
            DashError::TokenFile { path, source } => {
                write!(f, "cannot read the token file {}: {source}", path.display())
            }
            DashError::TokenNotUnicode => {
                write!(f, "{TOKEN_ENV} is set but is not UTF-8 text")
            }
            DashError::TokenNotAscii { found } => write!(
                f,
                "the dashboard's token has a character that is not printable ASCII ({found:?}): \
                 a browser cannot send it in a header; `openssl rand -hex 16` makes one"
            ),
            DashError::TokenFileNotRegular { path, kind } => write!(
                f,
                "the token file {} is not a regular file ({kind}): give a file holding the \
                 token, or the token in {TOKEN_ENV}",
                path.display()
            ),
            DashError::Bind { listen, source } => {
                write!(f, "cannot listen on {listen}: {source}")
            }
            DashError::Serve(e) => write!(f, "the dashboard's server failed: {e}"),
        }
    }
}

impl std::error::Error for DashError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DashError::Bind { source, .. } | DashError::TokenFile { source, .. } => Some(source),
            DashError::Serve(e) => Some(e),
            _ => None,
        }
    }
}
