//! `#[derive(Classify)]`: the `#[classify(...)]` attributes read ([`args`]), what they mean and
//! where they may go ([`valid`]: the options of one item gathered by [`options`], the fields
//! they name looked up by [`fields`]), and the `Classify` impl ([`expand`]).

pub mod args;
pub mod expand;
mod fields;
mod options;
pub mod valid;
