//! An attempt's error as the logs show it: through `Display` if its type has it, else `Debug`,
//! else nothing — picked at compile time by auto-ref specialisation, so that `#[retry]` works on
//! error types with neither.

use std::fmt;

/// An attempt's error as the logs show it: through `Display` if it has one, else `Debug`.
#[derive(Clone, Copy)]
pub enum ErrorText<'a> {
    /// The error is `Display`.
    Display(&'a dyn fmt::Display),
    /// The error is `Debug` only.
    Debug(&'a dyn fmt::Debug),
    /// Neither.
    Opaque,
}

impl fmt::Display for ErrorText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorText::Display(error) => error.fmt(f),
            ErrorText::Debug(error) => write!(f, "{error:?}"),
            ErrorText::Opaque => f.write_str("(an error with neither Display nor Debug)"),
        }
    }
}

impl ErrorText<'_> {
    /// `None` when there is no text to show.
    pub fn shown(&self) -> Option<&Self> {
        match self {
            ErrorText::Opaque => None,
            _ => Some(self),
        }
    }
}

impl fmt::Debug for ErrorText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Picks [`ErrorText`] for an error of any type by auto-ref specialisation: the expansion
/// calls `(&&&Describe(err)).describe()` with the three traits below in scope.
pub struct Describe<'a, E>(pub &'a E);

/// `Display` errors, the first choice.
pub trait ViaDisplay<'a> {
    /// The error's text.
    fn describe(&self) -> ErrorText<'a>;
}

impl<'a, E: fmt::Display> ViaDisplay<'a> for &&Describe<'a, E> {
    fn describe(&self) -> ErrorText<'a> {
        ErrorText::Display(self.0)
    }
}

/// `Debug` errors, the second choice.
pub trait ViaDebug<'a> {
    /// The error's text.
    fn describe(&self) -> ErrorText<'a>;
}

impl<'a, E: fmt::Debug> ViaDebug<'a> for &Describe<'a, E> {
    fn describe(&self) -> ErrorText<'a> {
        ErrorText::Debug(self.0)
    }
}

/// Any other error.
pub trait ViaNothing<'a> {
    /// No text.
    fn describe(&self) -> ErrorText<'a>;
}

impl<'a, E> ViaNothing<'a> for Describe<'a, E> {
    fn describe(&self) -> ErrorText<'a> {
        ErrorText::Opaque
    }
}
