//! An attempt's error as the logs show it: an `Error` with its whole source chain, else its
//! `Display`, else its `Debug`, else nothing — picked at compile time by auto-ref
//! specialisation, so that `#[retry]` works on error types with neither.

use std::error::Error;
use std::fmt;

use crate::erased::links;

/// The longest text [`ErrorText::Error`] shows, in bytes: a chain is a few links, and a log
/// line must stay a line.
const MAX_CHAIN_TEXT: usize = 1024;

/// An attempt's error as the logs show it: an `Error` and its sources, else `Display`, else
/// `Debug`.
#[derive(Clone, Copy)]
pub enum ErrorText<'a> {
    /// The error is an `Error`: its text, then each source's that adds something, joined by
    /// `": "` (`error sending request: client error (Connect): tcp connect error: Connection
    /// refused`), cut at 1 KiB.
    Error(&'a (dyn Error + 'a)),
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
            ErrorText::Error(error) => f.write_str(&chain_text(*error, MAX_CHAIN_TEXT)),
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

/// The one error chain → text of the crate, for the logs ([`ErrorText`], cut at 1 KiB) and the
/// durable queue's `last_err` (cut at 4 KiB): the text of `error`, then of each source that adds
/// something (not empty, not already in the text), joined by `": "`, cut at `max` bytes at a
/// char boundary (then `…`).
pub(crate) fn chain_text(error: &dyn Error, max: usize) -> String {
    let mut text = error.to_string();
    for link in error.source().into_iter().flat_map(links) {
        let part = link.to_string();
        if part.is_empty() || text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
        if text.len() > max {
            break;
        }
    }
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// Picks [`ErrorText`] for an error of any type by auto-ref specialisation: the expansion
/// calls `(&&&&Describe(err)).describe()` with the four traits below in scope.
pub struct Describe<'a, E>(pub &'a E);

/// `Error`s, the first choice: their source chain is shown too.
pub trait ViaError<'a> {
    /// The error's text.
    fn describe(&self) -> ErrorText<'a>;
}

impl<'a, E: Error> ViaError<'a> for &&&Describe<'a, E> {
    fn describe(&self) -> ErrorText<'a> {
        ErrorText::Error(self.0)
    }
}

/// `Display` errors, the second choice.
pub trait ViaDisplay<'a> {
    /// The error's text.
    fn describe(&self) -> ErrorText<'a>;
}

impl<'a, E: fmt::Display> ViaDisplay<'a> for &&Describe<'a, E> {
    fn describe(&self) -> ErrorText<'a> {
        ErrorText::Display(self.0)
    }
}

/// `Debug` errors, the third choice.
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

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    #[derive(Debug)]
    struct Sending(io::Error);

    impl fmt::Display for Sending {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("error sending request")
        }
    }

    impl Error for Sending {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_error_shows_its_whole_source_chain() {
        let refused = Sending(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            "tcp connect error: Connection refused",
        ));
        let text = (&&&&Describe(&refused)).describe().to_string();
        assert_eq!(
            text,
            "error sending request: tcp connect error: Connection refused"
        );
        // A link that repeats what is already shown adds nothing.
        let echo = Sending(io::Error::other("error sending request"));
        assert_eq!(
            (&&&&Describe(&echo)).describe().to_string(),
            "error sending request"
        );
    }

    #[test]
    fn a_long_chain_is_cut() {
        let long = Sending(io::Error::other("é".repeat(2000)));
        let text = (&&&&Describe(&long)).describe().to_string();
        assert!(text.len() <= MAX_CHAIN_TEXT + '…'.len_utf8());
        assert!(text.ends_with('…'));
    }

    // The expansion's auto-ref chain, written out as the macro writes it.
    #[allow(clippy::needless_borrow)]
    #[test]
    fn display_and_debug_only_types_are_still_shown() {
        struct OnlyDisplay;
        impl fmt::Display for OnlyDisplay {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("shown")
            }
        }
        #[derive(Debug)]
        struct OnlyDebug;
        struct Neither;
        assert_eq!((&&&&Describe(&OnlyDisplay)).describe().to_string(), "shown");
        assert_eq!(
            (&&&&Describe(&OnlyDebug)).describe().to_string(),
            "OnlyDebug"
        );
        assert!((&&&&Describe(&Neither)).describe().shown().is_none());
    }
}
