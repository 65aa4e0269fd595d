//! Optional integrations with the crates adapters use, one cargo feature each.
//!
//! - `anyhow`: the same walk for `anyhow::Error`;
//! - `reqwest`: `Classify` for `reqwest::Error`;
//! - `progenitor`: `Classify` for `progenitor_client::Error<E>` (generated OpenAPI clients);
//! - `failsafe`: `Classify` for `failsafe::Error<E>`;
//! - `sqlx`: `Classify` for `sqlx::Error` (the database's "try again" codes);
//! - `tonic`: `Classify` for `tonic::Status` (its code and the server's pushback) and
//!   `tonic::transport::Error`;
//! - `uuid`: `IdempotencyKey` for `uuid::Uuid` and deterministic v5 keys.
//!
//! The `http` feature lives in [`crate::http`].

#[cfg(feature = "anyhow")]
mod anyhow;
#[cfg(feature = "failsafe")]
pub(crate) mod failsafe;
#[cfg(feature = "progenitor")]
mod progenitor;
#[cfg(feature = "reqwest")]
mod reqwest;
#[cfg(feature = "sqlx")]
mod sqlx;
#[cfg(feature = "tonic")]
mod tonic;
#[cfg(feature = "uuid")]
pub(crate) mod uuid;
