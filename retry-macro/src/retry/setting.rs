//! One option of `#[retry(...)]` as read: not given, or given once under its name, with its
//! value when that passed its own checks.

use proc_macro2::Span;
use syn::Ident;

use crate::common::errors::Errors;

/// A value, with the span of the tokens to blame for it.
pub(crate) struct Given<T> {
    pub value: T,
    pub span: Span,
}

/// One option: not given, or given under `name`, with `value` when it passed its own checks.
pub(crate) struct Setting<T> {
    pub name: Option<Ident>,
    pub value: Option<T>,
}

impl<T> Default for Setting<T> {
    fn default() -> Self {
        Setting {
            name: None,
            value: None,
        }
    }
}

impl<T> Setting<T> {
    /// Takes `name` for this option; false, with the error, when it was given before.
    pub(super) fn claim(&mut self, errors: &mut Errors, name: &Ident) -> bool {
        if self.name.is_some() {
            errors.at(name, twice(name));
            return false;
        }
        self.name = Some(name.clone());
        true
    }

    /// Takes `name` and its `value`, unless the option was given before.
    pub(super) fn set_once(&mut self, errors: &mut Errors, name: &Ident, value: T) {
        if self.claim(errors, name) {
            self.value = Some(value);
        }
    }
}

impl<T: Copy> Setting<Given<T>> {
    /// The value, if given and valid.
    pub(crate) fn given(&self) -> Option<T> {
        self.value.as_ref().map(|g| g.value)
    }

    /// Where the value is, if given and valid.
    pub(crate) fn span(&self) -> Option<Span> {
        self.value.as_ref().map(|g| g.span)
    }
}

/// The message for an option given twice.
pub(super) fn twice(name: &Ident) -> String {
    format!("`{name}` is given twice: keep one `{name} = ...`")
}
