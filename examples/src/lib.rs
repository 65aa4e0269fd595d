//! Examples of retry-runtime live in `examples/`; run them with `cargo run --example NAME`.
