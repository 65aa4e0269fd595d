//! The link-time registry of the types that `#[derive(Classify)]`: each non-generic one submits
//! a downcast to itself, so that the walk of a type-erased error ([`erased`](super)) knows it
//! once it is a `Box<dyn Error>` or an `anyhow::Error` (what `Worker::handle` and `?` make of
//! it). Without this, an adapter's enum with `#[error(transparent)] Http(StatusError)` loses the
//! 4xx it holds when it is boxed: thiserror's `source()` skips the transparent field.
//!
//! Read on the failure path only (a registered type is looked for after the built-in ones); the
//! registration itself runs once, before `main`, in `inventory`'s constructors.

use std::error::Error;
use std::marker::PhantomData;

use crate::Classify;

/// One type that derives `Classify`: how to find it in a source chain.
#[doc(hidden)]
pub struct Registered {
    downcast: for<'e> fn(&'e (dyn Error + 'static)) -> Option<&'e dyn Classify>,
}

impl Registered {
    /// The entry of a type, given its downcast.
    pub const fn new(
        downcast: for<'e> fn(&'e (dyn Error + 'static)) -> Option<&'e dyn Classify>,
    ) -> Self {
        Registered { downcast }
    }
}

inventory::collect!(Registered);

/// `error` as the registered type it is, if it is one.
pub(crate) fn find<'e>(error: &'e (dyn Error + 'static)) -> Option<&'e dyn Classify> {
    inventory::iter::<Registered>
        .into_iter()
        .find_map(|entry| (entry.downcast)(error))
}

/// The derive's probe of its type, called as `(&&Downcast::<T>::new()).downcast(error)`: a downcast
/// when the type is an `Error` (autoref
/// specialisation picks [`DowncastError`]), none otherwise ([`DowncastNothing`]: a type that is
/// only ever returned typed needs no entry).
#[doc(hidden)]
pub struct Downcast<T>(PhantomData<T>);

impl<T> Downcast<T> {
    /// The probe.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Downcast(PhantomData)
    }
}

/// The probe of an `Error` type.
#[doc(hidden)]
pub trait DowncastError {
    /// `error` as the probed type.
    fn downcast<'e>(&self, error: &'e (dyn Error + 'static)) -> Option<&'e dyn Classify>;
}

impl<T: Error + Classify + 'static> DowncastError for &Downcast<T> {
    #[inline]
    fn downcast<'e>(&self, error: &'e (dyn Error + 'static)) -> Option<&'e dyn Classify> {
        error
            .downcast_ref::<T>()
            .map(|typed| typed as &dyn Classify)
    }
}

/// The probe of any other type: never found.
#[doc(hidden)]
pub trait DowncastNothing {
    /// Always `None`.
    fn downcast<'e>(&self, error: &'e (dyn Error + 'static)) -> Option<&'e dyn Classify>;
}

impl<T> DowncastNothing for Downcast<T> {
    #[inline]
    fn downcast<'e>(&self, _: &'e (dyn Error + 'static)) -> Option<&'e dyn Classify> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::fmt;
    use std::time::Duration;

    use super::*;
    use crate::erased;

    /// An adapter error as `#[derive(Classify)]` would register it.
    #[derive(Debug)]
    struct Overloaded;

    impl fmt::Display for Overloaded {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("overloaded")
        }
    }

    impl Error for Overloaded {}

    impl Classify for Overloaded {
        fn is_transient(&self) -> bool {
            true
        }
        fn retry_after(&self) -> Option<Duration> {
            Some(Duration::from_secs(3))
        }
    }

    /// A `Classify` type that is no `Error`: its probe never matches.
    struct NotAnError;

    impl Classify for NotAnError {
        fn is_transient(&self) -> bool {
            true
        }
    }

    fn overloaded<'e>(error: &'e (dyn Error + 'static)) -> Option<&'e dyn Classify> {
        #[allow(unused_imports)]
        use super::{DowncastError as _, DowncastNothing as _};
        (&&Downcast::<Overloaded>::new()).downcast(error)
    }

    inventory::submit! { Registered::new(overloaded) }

    #[test]
    fn a_registered_type_is_known_once_boxed() {
        let boxed: Box<dyn Error + Send + Sync> = Box::new(Overloaded);
        let verdict = erased::first_known(&*boxed).expect("registered");
        assert!(verdict.transient);
        assert_eq!(verdict.retry_after, Some(Duration::from_secs(3)));
        assert!(find(&std::io::Error::other("x")).is_none());
    }

    #[test]
    fn a_type_that_is_no_error_registers_a_probe_that_never_matches() {
        #[allow(unused_imports)]
        use super::{DowncastError as _, DowncastNothing as _};
        let probe = &&Downcast::<NotAnError>::new();
        assert!(probe.downcast(&Overloaded).is_none());
        assert!(NotAnError.is_transient());
    }
}
