//! [`Report`]: what a configuration call applied and what it refused, and why.

use std::fmt;

/// What [`apply`](super::apply) or [`reload`](super::reload) did: every
/// value applied, every value refused (with the rule it would break and the value that stays).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// The values in effect now.
    pub applied: Vec<Applied>,
    /// The values refused; the compiled (or code's) value stays in their place.
    pub refused: Vec<Refusal>,
}

/// A value applied.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Applied {
    /// The system it applies to.
    pub system: String,
    /// Where it came from: `RETRY_PAYMENTS_ATTEMPTS`, or `payments.toml: systems.payments.attempts`.
    pub source: String,
    /// The value as written.
    pub value: String,
}

/// A value refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// Where it came from, as in [`Applied::source`].
    pub source: String,
    /// The value as written.
    pub value: String,
    /// Why: the rule it would break (an id such as R-RES-RE-3 where one applies) and the value
    /// that stays.
    pub reason: String,
}

impl Report {
    /// Whether every value was applied.
    pub fn is_clean(&self) -> bool {
        self.refused.is_empty()
    }

    pub(super) fn refuse(&mut self, source: &str, value: &str, reason: impl Into<String>) {
        self.refused.push(Refusal {
            source: source.to_owned(),
            value: value.to_owned(),
            reason: reason.into(),
        });
    }

    pub(super) fn apply(&mut self, system: &str, source: &str, value: &str) {
        self.applied.push(Applied {
            system: system.to_owned(),
            source: source.to_owned(),
            value: value.to_owned(),
        });
    }

    /// One event per value: INFO for those applied, WARN for those refused.
    pub(super) fn log(&self) {
        #[cfg(feature = "tracing")]
        {
            for a in &self.applied {
                tracing::info!(system = %a.system, source = %a.source, value = %a.value, "retry configuration applied");
            }
            for r in &self.refused {
                tracing::warn!(source = %r.source, value = %r.value, reason = %r.reason, "retry configuration refused");
            }
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={} refused: {}", self.source, self.value, self.reason)
    }
}

impl fmt::Display for Report {
    /// One line per value: `applied RETRY_PAYMENTS_ATTEMPTS=2 (payments)`, `RETRY_…=9 refused: …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for a in &self.applied {
            writeln!(f, "applied {}={} ({})", a.source, a.value, a.system)?;
        }
        for r in &self.refused {
            writeln!(f, "{r}")?;
        }
        Ok(())
    }
}
