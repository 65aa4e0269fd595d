//! `#[retry]`: the attribute's rules ([`valid`], reading the options gathered by [`options`],
//! the fn's shape checked by [`signature`], fresh keys spotted by [`fresh_key`]) and its
//! expansion into a loop ([`expand`], with `protect`'s permit and admissions in [`protect`]). The grammar of its arguments is shared with
//! `#[classify]` (`common::args`).

mod ending;
pub(crate) mod expand;
pub(crate) mod fallback;
mod fallback_expand;
mod fallback_valid;
pub(crate) mod fresh_key;
mod hand_over;
pub(crate) mod hedge;
mod hedge_expand;
mod hedge_valid;
mod locals;
pub(crate) mod options;
mod protect;
mod setting;
mod signature;
pub(crate) mod valid;
mod verdict;
