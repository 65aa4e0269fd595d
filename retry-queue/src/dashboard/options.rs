//! How [`serve`](super::serve) runs ([`DashOptions`], the flags of `retry-queue dash`); why it
//! does not is [`DashError`] (`dash_error.rs`).

use std::net::{Ipv4Addr, SocketAddr};

use super::dash_error::DashError;
use super::server::{
    DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
    DEFAULT_WRITE_TIMEOUT,
};
use super::token;

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
    /// non-loopback address. Trimmed of surrounding whitespace; at least [`MIN_TOKEN_LEN`](crate::dashboard::MIN_TOKEN_LEN)
    /// characters ([`check`](DashOptions::check)). `retry-queue dash` reads it from its flags or [`TOKEN_ENV`](super::TOKEN_ENV).
    pub token: Option<String>,
    /// How long a request's headers may take to arrive before [`serve`](super::serve) cuts the connection
    /// off (an idle keep-alive connection too): [`DEFAULT_HEADER_TIMEOUT`] by default.
    pub header_timeout: std::time::Duration,
    /// How many connections [`serve`](super::serve) serves at once (the next ones wait):
    /// [`DEFAULT_MAX_CONNECTIONS`] by default.
    pub max_connections: usize,
    /// How many of those connections one client address (an IPv4 address, an IPv6 /64) may
    /// hold at once; the next ones are answered 503 and closed, so that one address cannot
    /// hold every slot: [`DEFAULT_MAX_CONNECTIONS_PER_ADDRESS`] (64) by default. Behind a
    /// reverse proxy every client has the proxy's address: raise it to `max_connections`.
    pub max_connections_per_address: usize,
    /// How long writing an answer may stall (its client reading none of it) before
    /// [`serve`](super::serve) cuts the connection off: [`DEFAULT_WRITE_TIMEOUT`] by default.
    pub write_timeout: std::time::Duration,
}

impl Default for DashOptions {
    fn default() -> DashOptions {
        DashOptions {
            listen: DEFAULT_LISTEN,
            read_only: false,
            token: None,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
        }
    }
}

impl DashOptions {
    /// Checks the options as [`serve`](super::serve) does before binding: a non-loopback `listen` needs a
    /// token, and a token is not blank, nor shorter than [`MIN_TOKEN_LEN`](crate::dashboard::MIN_TOKEN_LEN) characters once
    /// trimmed, nor made of fewer than [`MIN_TOKEN_DISTINCT`](crate::dashboard::MIN_TOKEN_DISTINCT) different characters.
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
