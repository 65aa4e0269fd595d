//! One system's protections: its breaker and bulkhead as they run, and what the code set for
//! them, which the configuration tightens (`crate::config`) into what is in effect.

use std::sync::{Mutex, OnceLock, PoisonError};

use super::breaker_cell::BreakerCell;
use super::bulkhead::BulkheadCell;
use super::settings::Settings;

/// What the configuration makes of a system's code settings (`config::protections`: the code's,
/// tightened), put here by the configuration before it first puts a map into force. The
/// protections sit below the configuration and never name it; until then there is nothing to
/// tighten.
static TIGHTEN: OnceLock<fn(&str, Settings) -> Settings> = OnceLock::new();

/// Makes `tighten` what the protections ask for the settings in effect (the configuration's
/// `protections`). Called by the configuration; the first call wins.
pub(crate) fn tighten_with(tighten: fn(&str, Settings) -> Settings) {
    let _ = TIGHTEN.set(tighten);
}

/// One system's protections.
pub(crate) struct Protection {
    pub(crate) system: &'static str,
    pub(crate) breaker: BreakerCell,
    pub(crate) bulkhead: BulkheadCell,
    /// What the code set: the settings configuration tightens.
    code: Mutex<Settings>,
}

impl std::fmt::Debug for Protection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Protection")
            .field("system", &self.system)
            .field(
                "breaker",
                &self.breaker.is_enabled().then(|| self.breaker.state()),
            )
            .field(
                "bulkhead",
                &self.bulkhead.is_enabled().then(|| self.bulkhead.state()),
            )
            .finish()
    }
}

impl Protection {
    pub(super) fn new(system: &'static str) -> Protection {
        Protection {
            system,
            breaker: BreakerCell::new(system),
            bulkhead: BulkheadCell::new(system),
            code: Mutex::new(Settings::default()),
        }
    }

    /// Puts the code's settings, tightened by the configuration now in force, into effect (the
    /// configuration changed; `crate::systems::refresh` logs what it newly enabled).
    pub(crate) fn refresh(&self) {
        self.set_code(|_| {});
    }

    /// What the code set.
    pub(crate) fn code(&self) -> Settings {
        *self.code.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes what the code set, and puts it into effect tightened by the configuration now in
    /// force (a no-op `change` after the configuration changed).
    pub(crate) fn set_code(&self, change: impl FnOnce(&mut Settings)) {
        let mut code = self.code.lock().unwrap_or_else(PoisonError::into_inner);
        change(&mut code);
        self.put_into_effect(*code);
    }

    /// Puts `code` into effect, tightened by the configuration.
    pub(super) fn put_into_effect(&self, code: Settings) {
        let effective = TIGHTEN
            .get()
            .map_or(code, |tighten| tighten(self.system, code));
        self.breaker.configure(effective.breaker);
        self.bulkhead.configure(effective.bulkhead);
    }
}
