//! What both macros share: the grammar of their arguments ([`args`], with the one
//! `crate = "…"` parser in [`krate`]), the error collector ([`errors`]), spans, durations
//! written as strings, and the retry rules themselves ([`rules`]).

pub mod args;
pub mod duration;
pub mod errors;
pub mod krate;
/// The retry rules: `retry-runtime/src/rules.rs` itself, through a symlink (cargo package
/// follows it), so that the attribute and `Policy::new` apply one definition.
pub mod rules;
pub mod spans;

#[cfg(test)]
mod tests {
    #[test]
    fn the_rules_are_the_runtimes_own_file() {
        // Fails if the symlink is replaced by a copy that then drifts, or checked out as a
        // plain file (a Windows checkout without `core.symlinks`).
        assert_eq!(
            include_str!("rules.rs"),
            include_str!("../../../retry-runtime/src/rules.rs")
        );
    }
}
