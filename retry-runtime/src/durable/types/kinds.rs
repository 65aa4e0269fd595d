//! The task kinds a claim takes ([`Kinds`]): a worker's handler kinds, or the kinds mapped to
//! one of its systems. Built once when the worker starts, passed by reference through the
//! processor, the claim round, the lease and the gate to the store, which alone turns it into
//! text (a JSON array, `store/db.rs`), once per list.

use std::sync::{Arc, OnceLock};

/// A sorted list of task kinds without repeats; clones share it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Kinds(Arc<Listed>);

#[derive(Debug, Default)]
struct Listed {
    names: Vec<String>,
    /// The list as the store binds it, made by the store on its first claim: a worker claims
    /// with the same list every round, so the text is made once, not per claim.
    encoded: OnceLock<String>,
}

impl Kinds {
    /// The kinds of `names`, sorted, each once.
    pub(crate) fn new<I, S>(names: I) -> Kinds
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut names: Vec<String> = names.into_iter().map(Into::into).collect();
        names.sort_unstable();
        names.dedup();
        Kinds(Arc::new(Listed {
            names,
            encoded: OnceLock::new(),
        }))
    }

    /// The list as text, made by `encode` on the first call and kept (the store's form: one
    /// encoding for every claim of the list's life).
    pub(crate) fn encoded(&self, encode: impl FnOnce(&[String]) -> String) -> &str {
        self.0.encoded.get_or_init(|| encode(&self.0.names))
    }
}

#[cfg(test)]
mod tests {
    use super::Kinds;

    #[test]
    fn kinds_are_sorted_once_each_and_encoded_once() {
        let kinds = Kinds::new(["sms", "email", "sms"]);
        let clone = kinds.clone();
        assert_eq!(kinds.encoded(|names| names.join(",")), "email,sms");
        // Kept: a second encoder is not asked, and clones share the text.
        assert_eq!(
            clone.encoded(|_| unreachable!("encoded twice")),
            "email,sms"
        );
    }
}
