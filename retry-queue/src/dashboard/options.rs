//! How [`serve`](super::serve) runs ([`DashOptions`], the flags of `retry-queue dash`) and why
//! it does not ([`DashError`]).

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};

use super::server::{DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS};
use super::token::{self, MAX_TOKEN_FILE_BYTES, MIN_TOKEN_DISTINCT, MIN_TOKEN_LEN, TOKEN_ENV};

/// The address [`serve`](super::serve) listens on by default: `127.0.0.1:8080`.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

/// How [`serve`](super::serve) runs the dashboard (the flags of `retry-queue dash`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DashOptions {
    /// Where to listen; [`DEFAULT_LISTEN`] by default. A non-loopback address needs a token.
    pub listen: SocketAddr,
    /// Refuse every action (403 to every POST) and show no buttons.
    pub read_only: bool,
    /// `Some(T)`: every API request needs `Authorization: Bearer T`. Required to listen on a
    /// non-loopback address. Trimmed of surrounding whitespace; at least [`MIN_TOKEN_LEN`]
    /// characters ([`check`](DashOptions::check)). [`token_from`](super::token_from) reads it from its sources.
    pub token: Option<String>,
    /// How long a request's headers may take to arrive before [`serve`](super::serve) cuts the connection
    /// off (an idle keep-alive connection too): [`DEFAULT_HEADER_TIMEOUT`] by default.
    pub header_timeout: std::time::Duration,
    /// How many connections [`serve`](super::serve) serves at once (the next ones wait):
    /// [`DEFAULT_MAX_CONNECTIONS`] by default.
    pub max_connections: usize,
}

impl Default for DashOptions {
    fn default() -> DashOptions {
        DashOptions {
            listen: DEFAULT_LISTEN,
            read_only: false,
            token: None,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl DashOptions {
    /// Checks the options as [`serve`](super::serve) does before binding: a non-loopback `listen` needs a
    /// token, and a token is not blank, nor shorter than [`MIN_TOKEN_LEN`] characters once
    /// trimmed, nor made of fewer than [`MIN_TOKEN_DISTINCT`] different characters.
    pub fn check(&self) -> Result<(), DashError> {
        if let Some(token) = &self.token {
            token::check_token(token)?;
        } else if !self.listen.ip().is_loopback() {
            return Err(DashError::TokenRequired {
                listen: self.listen,
            });
        }
        Ok(())
    }
}

/// Why [`serve`](super::serve) did not start or stopped.
#[derive(Debug)]
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
