//! `#[retry]`: the attribute's rules ([`valid`], reading the options gathered by [`options`],
//! the fn's shape checked by [`signature`], fresh keys spotted by [`fresh_key`]) and its
//! expansion into a loop ([`expand`], with `protect`'s permit and admissions in [`protect`]). The grammar of its arguments is shared with
//! `#[classify]` (`common::args`).

pub mod expand;
pub mod fresh_key;
mod hand_over;
pub mod hedge;
mod hedge_expand;
mod hedge_valid;
mod locals;
pub mod options;
mod protect;
mod setting;
mod signature;
pub mod valid;
mod verdict;
