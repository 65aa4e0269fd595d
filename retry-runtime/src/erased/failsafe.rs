//! `failsafe::Error::Rejected` in a source chain (feature `failsafe`): the walk knows the
//! rejection of the inner types users box most often.

use ::failsafe::Error;

/// true for a `failsafe::Error::Rejected` of one of the inner types users box most often (a
/// downcast needs the concrete type).
pub(super) fn is_rejection(error: &(dyn std::error::Error + 'static)) -> bool {
    macro_rules! rejected_of {
        ($($inner:ty),* $(,)?) => {
            false $(|| matches!(error.downcast_ref::<Error<$inner>>(), Some(Error::Rejected)))*
        };
    }
    #[cfg(feature = "reqwest")]
    if rejected_of!(::reqwest::Error) {
        return true;
    }
    rejected_of!(std::io::Error, crate::http::StatusError)
}
