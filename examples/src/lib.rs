//! Examples of retry-runtime live in `examples/`; run them with `cargo run --example NAME`.
//! What one of them needs beyond a screen of code lives here.

pub mod generated_gateway;
pub mod outage;
