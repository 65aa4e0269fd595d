//! UUIDs as idempotency keys (feature `uuid`).

use ::uuid::Uuid;

use crate::IdempotencyKey;

/// The namespace of [`idempotency_key_v5`]'s keys: `a68aefd2-4d74-51a8-8394-df881d8c8ddd`, the
/// UUID v5 of the URL `https://example.invalid/retry-runtime/idempotency-key` in the URL
/// namespace of RFC 9562. Fixed forever: changing it would change every key.
pub const IDEMPOTENCY_KEY_NAMESPACE: Uuid =
    Uuid::from_u128(0xa68a_efd2_4d74_51a8_8394_df88_1d8c_8ddd);

/// A UUID is blank when it is the nil UUID (all zeros): the call then runs once, with no retry.
impl IdempotencyKey for Uuid {
    fn is_blank(&self) -> bool {
        self.is_nil()
    }
}

/// The deterministic idempotency key of one operation on one order: a UUID v5 (RFC 9562) of
/// `order_id` and `operation` — the key R-RES-RE-1 asks for, derived from the request, so every
/// attempt, every retry after a crash and every replica sends the same one.
///
/// - The same inputs always give the same key, in every version of this crate; a different
///   order or a different operation (`"register"`, `"refund"`…) gives a different key.
/// - The name hashed in the [`IDEMPOTENCY_KEY_NAMESPACE`] is the UTF-8 text
///   `{len}:{order_id}:{operation}`, `len` being `order_id`'s length in bytes, in decimal: the
///   length keeps `("a:b", "c")` and `("a", "b:c")` apart. Any UUID v5 library computes the same
///   key from that, e.g. Python's `uuid.uuid5(namespace, f"{len(o.encode())}:{o}:{op}")`.
/// - A blank `order_id` or `operation` (empty or white space) gives the nil UUID, which is a
///   [blank](IdempotencyKey::is_blank) key: the write then runs once, with no retry, rather than
///   share one key with every other order that lacks an id.
///
/// Not for keys that must differ between two user actions on the same order and operation
/// (two separate top-ups, say): generate one UUID v7 per user action and save it with the order.
///
/// With the `uuid` feature.
///
/// ```
/// use retry_runtime::{idempotency_key_v5, IdempotencyKey};
///
/// let key = idempotency_key_v5("order-42", "register");
/// assert_eq!(key.to_string(), "2624c362-353e-57f8-9557-6c2d2394d8b0");
/// assert_eq!(key, idempotency_key_v5("order-42", "register"));
/// assert_ne!(key, idempotency_key_v5("order-42", "refund"));
/// assert!(idempotency_key_v5("", "register").is_blank());
/// ```
pub fn idempotency_key_v5(order_id: &str, operation: &str) -> Uuid {
    if order_id.is_blank() || operation.is_blank() {
        return Uuid::nil();
    }
    let name = format!("{}:{order_id}:{operation}", order_id.len());
    Uuid::new_v5(&IDEMPOTENCY_KEY_NAMESPACE, name.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank<K: IdempotencyKey + ?Sized>(key: &K) -> bool {
        key.is_blank()
    }

    #[test]
    fn the_namespace_is_the_documented_v5_of_our_url() {
        assert_eq!(
            IDEMPOTENCY_KEY_NAMESPACE,
            Uuid::new_v5(
                &Uuid::NAMESPACE_URL,
                b"https://example.invalid/retry-runtime/idempotency-key"
            )
        );
        assert_eq!(
            IDEMPOTENCY_KEY_NAMESPACE.to_string(),
            "a68aefd2-4d74-51a8-8394-df881d8c8ddd"
        );
    }

    #[test]
    fn keys_are_stable_v5_uuids() {
        // Computed independently (Python's uuid.uuid5): a change here changes every saved key.
        let cases = [
            (
                "order-42",
                "register",
                "2624c362-353e-57f8-9557-6c2d2394d8b0",
            ),
            ("order-42", "refund", "71f9e409-91ae-5dfd-bc1b-3c216e5013b9"),
            (
                "заказ-7",
                "register",
                "713b927c-6ab4-563d-ab8d-1bc69a657fcd",
            ),
        ];
        for (order, operation, expected) in cases {
            let key = idempotency_key_v5(order, operation);
            assert_eq!(key.to_string(), expected, "{order} {operation}");
            assert_eq!(key.get_version_num(), 5);
            assert_eq!(key, idempotency_key_v5(order, operation));
            assert!(!blank(&key));
        }
    }

    #[test]
    fn different_inputs_give_different_keys() {
        let register = idempotency_key_v5("order-42", "register");
        assert_ne!(register, idempotency_key_v5("order-42", "refund"));
        assert_ne!(register, idempotency_key_v5("order-43", "register"));
        // The length prefix keeps a separator inside the order id from colliding.
        assert_ne!(
            idempotency_key_v5("a:b", "c"),
            idempotency_key_v5("a", "b:c")
        );
    }

    #[test]
    fn blank_inputs_give_the_nil_key_which_is_blank() {
        for (order, operation) in [("", "register"), ("  ", "register"), ("order-42", " \t")] {
            let key = idempotency_key_v5(order, operation);
            assert_eq!(key, Uuid::nil(), "{order:?} {operation:?}");
            assert!(blank(&key));
            assert!(blank(&&key));
        }
        assert!(blank(&Uuid::nil()));
        assert!(!blank(&Uuid::max()));
    }
}
