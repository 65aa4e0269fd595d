//! Optional integrations with the crates adapters use, one cargo feature each.
