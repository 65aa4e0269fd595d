//! Idempotency keys.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// A value that can serve as the idempotency key of a retried write (R-RES-RE-1).
///
/// `#[retry(write, idempotency_key = EXPR)]` evaluates `EXPR` once, before the first attempt,
/// borrows it for the whole call, and checks it with [`is_blank`](IdempotencyKey::is_blank):
/// a blank key means the external system cannot deduplicate, so the call runs **once, with no
/// retry** (no panic, no error of our own).
///
/// The key must be deterministic: derived from the request (a UUID v5 of order id +
/// operation) or generated once per user action and saved — never minted afresh per call.
/// The macro rejects key expressions that visibly mint one (`Uuid::new_v4()`, `rand::random()`…).
///
/// Implemented for `str`, `String`, `Cow<str>`, `Box<str>`, `Arc<str>` (and `uuid::Uuid` with
/// the `uuid` feature, the nil UUID being blank) and references to any implementor. A key is
/// `Sync`: the loop keeps a reference to it across its pauses, and the call's future must stay
/// `Send` (so `Rc<str>` is not a key). Implement it for a key type of your own:
///
/// ```
/// use std::fmt;
/// use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
/// use retry_runtime::{retry, Classify, IdempotencyKey};
///
/// /// The key saved with an order when the user confirmed it.
/// struct OrderKey(String);
///
/// impl fmt::Display for OrderKey {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         f.write_str(&self.0) // what the events show as `idempotency_key`
///     }
/// }
///
/// impl IdempotencyKey for OrderKey {
///     fn is_blank(&self) -> bool {
///         self.0.trim().is_empty()
///     }
/// }
///
/// #[derive(Debug)]
/// struct Unavailable;
/// impl Classify for Unavailable {
///     fn is_transient(&self) -> bool { true }
/// }
///
/// static CALLS: AtomicU32 = AtomicU32::new(0);
///
/// #[retry(write, idempotency_key = key)]
/// async fn charge(key: &OrderKey, cents: u64) -> Result<(), Unavailable> {
///     CALLS.fetch_add(1, SeqCst); // the real adapter sends `key` with the request
///     Err(Unavailable)
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// assert!(charge(&OrderKey("order-7:charge".into()), 1250).await.is_err());
/// assert_eq!(CALLS.swap(0, SeqCst), 3); // retried: the gateway deduplicates on the key
/// assert!(charge(&OrderKey(String::new()), 1250).await.is_err());
/// assert_eq!(CALLS.swap(0, SeqCst), 1); // blank: sent once, never retried
/// # }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as an idempotency key",
    label = "this is not a text key",
    note = "`idempotency_key = ...` takes text the external system deduplicates on: `str`, `String`, `Cow<str>` or a reference to one (R-RES-RE-1)",
    note = "a write is retried only with a key every call has: an `Option` is not a key (take the key out before the call, and refuse the call without one; `.as_deref()` and a blank check is not a key either), and a number or an id becomes one as text (`order.id.to_string()`, or a UUID v5 of order id + operation)",
    note = "a key type defined in your own crate can implement `retry_runtime::IdempotencyKey`"
)]
pub trait IdempotencyKey: fmt::Display + Sync {
    /// true when there is no usable key: the text is empty or only white space.
    fn is_blank(&self) -> bool;
}

impl IdempotencyKey for str {
    fn is_blank(&self) -> bool {
        self.trim().is_empty()
    }
}

macro_rules! via_str {
    ($($ty:ty),* $(,)?) => {$(
        impl IdempotencyKey for $ty {
            fn is_blank(&self) -> bool {
                str::is_blank(self)
            }
        }
    )*};
}
via_str!(String, Cow<'_, str>, Box<str>, Arc<str>);

impl<K: IdempotencyKey + ?Sized> IdempotencyKey for &K {
    fn is_blank(&self) -> bool {
        K::is_blank(self)
    }
}

impl<K: IdempotencyKey + ?Sized> IdempotencyKey for &mut K {
    fn is_blank(&self) -> bool {
        K::is_blank(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank<K: IdempotencyKey + ?Sized>(key: &K) -> bool {
        key.is_blank()
    }

    #[test]
    fn empty_and_whitespace_keys_are_blank() {
        assert!(blank(""));
        assert!(blank("  \t\n"));
        assert!(blank(&String::new()));
        assert!(blank(&Cow::Borrowed(" ")));
        assert!(blank(&&&""));
        assert!(blank(&Arc::<str>::from("")));
    }

    #[test]
    fn real_keys_are_not_blank() {
        assert!(!blank("order-42:register"));
        assert!(!blank(&String::from("k")));
        assert!(!blank(&Cow::<str>::Owned("k".into())));
        assert!(!blank(&Box::<str>::from(" k ")));
        assert!(!blank(&&mut String::from("k")));
    }
}
