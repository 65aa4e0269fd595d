//! `#[derive(Classify)]`: the `#[classify(...)]` attributes read ([`args`]), what they mean and
//! where they may go ([`valid`]: the options of one item gathered by [`options`], the fields
//! they name looked up by [`fields`]), the `Classify` impl ([`expand`], its optional methods in
//! [`methods`], the field bindings both write in [`bindings`]) and the type's entry in the runtime's link-time registry ([`register`]).

pub(crate) mod args;
mod bindings;
pub(crate) mod expand;
mod fields;
mod methods;
mod options;
mod register;
pub(crate) mod valid;
