//! Shared fixtures of the retry-runtime tests.
