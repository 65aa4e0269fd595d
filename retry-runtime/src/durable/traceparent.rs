//! The trace context a task carries (issue 33): the W3C Trace Context `traceparent` text of the
//! span that enqueued it (`00-<trace id>-<parent span id>-<flags>`), stored in the column
//! `trace_parent`. Text, not an OpenTelemetry type, so that it is read, shown and given
//! ([`Task::trace_parent`](crate::durable::Task::trace_parent)) without the `opentelemetry`
//! feature; with it, [`current`] takes it from the current `tracing` span and [`span_context`]
//! turns it back into the context the worker's attempt span continues.

use crate::durable::error::Error;

/// Longest `traceparent` accepted: version `00` is 55 bytes; a later version may append fields,
/// but nothing needs more than this.
const MAX_BYTES: usize = 256;

/// The length of a version `00` `traceparent`, and of the fields every version starts with.
const LEN_00: usize = 55;

/// Checks that `text` is a W3C `traceparent`: `VV-<32 hex>-<16 hex>-<2 hex>` in lower case,
/// the version not `ff`, neither id all zeros; version `00` exactly that, a later version
/// possibly followed by `-` and more fields (the W3C rule for versions a reader does not know).
pub(crate) fn check(text: &str) -> Result<(), Error> {
    let refuse = |why: &str| {
        let shown: String = text
            .chars()
            .take(64)
            .collect::<String>()
            .escape_debug()
            .to_string();
        let more = if text.chars().count() > 64 { "…" } else { "" };
        Err(Error::Invalid(format!(
            "the task's trace parent \"{shown}{more}\" is not a W3C traceparent \
             (00-<32 hex digits>-<16 hex digits>-<2 hex digits>, lower case): {why}"
        )))
    };
    if text.len() > MAX_BYTES {
        return refuse(&format!(
            "{} bytes, above the {MAX_BYTES}-byte limit",
            text.len()
        ));
    }
    let bytes = text.as_bytes();
    let fields_end = bytes.len().min(LEN_00);
    let fields: Vec<&[u8]> = bytes[..fields_end].split(|&b| b == b'-').collect();
    let lengths: Vec<usize> = fields.iter().map(|f| f.len()).collect();
    if bytes.len() < LEN_00 || lengths != [2, 32, 16, 2] {
        return refuse("not four fields of 2, 32, 16 and 2 characters separated by '-'");
    }
    if !bytes[..LEN_00]
        .iter()
        .all(|&b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return refuse("a character that is not a lower-case hex digit");
    }
    match (fields[0], bytes.len()) {
        (b"ff", _) => return refuse("version ff is invalid"),
        (b"00", LEN_00) => {}
        (b"00", _) => return refuse("version 00 has exactly four fields"),
        (_, LEN_00) => {}
        (_, _) if bytes[LEN_00] == b'-' => {}
        _ => return refuse("a later version's extra fields follow a '-'"),
    }
    if fields[1].iter().all(|&b| b == b'0') {
        return refuse("the trace id is all zeros");
    }
    if fields[2].iter().all(|&b| b == b'0') {
        return refuse("the parent id is all zeros");
    }
    Ok(())
}

/// The trace id (32 hex digits) of a `traceparent` that passed [`check`]; `None` for any other
/// text (a row written by hand, say).
pub(crate) fn trace_id(text: &str) -> Option<&str> {
    check(text).ok().map(|()| &text[3..35])
}

/// The `traceparent` of the current `tracing` span's OpenTelemetry context, if it has a valid
/// one: none outside every span, or without a `tracing-opentelemetry` layer.
#[cfg(feature = "opentelemetry")]
pub(crate) fn current() -> Option<String> {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let span = tracing::Span::current();
    if span.is_none() {
        return None;
    }
    let cx = span.context();
    let parent = cx.span().span_context().clone();
    parent.is_valid().then(|| {
        format!(
            "00-{:032x}-{:016x}-{:02x}",
            parent.trace_id(),
            parent.span_id(),
            parent.trace_flags().to_u8()
        )
    })
}

/// Without the `opentelemetry` feature nothing is recorded.
#[cfg(not(feature = "opentelemetry"))]
#[inline(always)]
pub(crate) fn current() -> Option<String> {
    None
}

/// The remote span context `text` names, for the attempt span to continue or link to; `None`
/// for a text that is not a valid `traceparent`.
#[cfg(feature = "opentelemetry")]
pub(crate) fn span_context(text: &str) -> Option<opentelemetry::trace::SpanContext> {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    trace_id(text)?;
    let trace_id = TraceId::from_hex(&text[3..35]).ok()?;
    let span_id = SpanId::from_hex(&text[36..52]).ok()?;
    let flags = u8::from_str_radix(&text[53..55], 16).ok()?;
    // Only the sampled bit is defined; the others are not passed on (W3C).
    let flags = TraceFlags::new(flags) & TraceFlags::SAMPLED;
    let remote = true;
    Some(SpanContext::new(
        trace_id,
        span_id,
        flags,
        remote,
        TraceState::default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_w3c_traceparent_passes_and_gives_its_trace_id() {
        assert!(check(GOOD).is_ok());
        assert_eq!(trace_id(GOOD), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        // A later version may append fields after a '-'.
        let later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever";
        assert!(check(later).is_ok());
        assert!(check(&later[..LEN_00]).is_ok());
    }

    #[test]
    fn malformed_traceparents_are_invalid_with_the_reason() {
        let cases = [
            ("", "four fields"),
            ("garbage", "four fields"),
            (&GOOD[..54], "four fields"),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
                "four fields",
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                "lower-case hex",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
                "lower-case hex",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
                "four fields",
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "version ff",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
                "exactly four",
            ),
            (
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
                "follow a '-'",
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "trace id is all zeros",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "parent id is all zeros",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0é",
                "lower-case hex",
            ),
        ];
        for (text, why) in cases {
            match check(text) {
                Err(Error::Invalid(msg)) => assert!(msg.contains(why), "{text:?}: {msg}"),
                other => panic!("{text:?}: {other:?}"),
            }
            assert_eq!(trace_id(text), None, "{text:?}");
        }
        let long = format!(
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-{}",
            "a".repeat(300)
        );
        match check(&long) {
            Err(Error::Invalid(msg)) => {
                assert!(msg.contains("256-byte limit") && msg.contains('…'), "{msg}");
                assert!(msg.len() < 300, "the whole text is not repeated: {msg}");
            }
            other => panic!("{other:?}"),
        }
    }
}
