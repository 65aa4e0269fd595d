//! The [`Site`] of a layer or middleware built at run time (the tower layer, the reqwest
//! middleware): the builder's setters only record settings, and the site is leaked when the
//! layer is first used, once per layer value, not once per setter called.

use std::sync::OnceLock;

use super::Site;
use crate::backoff::Policy;

/// A site's settings, and the site once made.
#[derive(Clone, Debug)]
pub(crate) struct BuiltSite {
    system: &'static str,
    operation: &'static str,
    policy: Policy,
    protect: bool,
    // A clone made after the first use shares the site; one made before leaks its own, when
    // it is used: at most one per layer value, so build layers at start-up.
    site: OnceLock<&'static Site>,
}

impl BuiltSite {
    /// The reference schedule, with `operation = system` until [`named`](Self::named).
    pub(crate) fn new(system: &'static str) -> Self {
        BuiltSite {
            system,
            operation: system,
            policy: Policy::DEFAULT,
            protect: false,
            site: OnceLock::new(),
        }
    }

    /// The same settings with another operation label.
    pub(crate) fn named(self, operation: &'static str) -> Self {
        BuiltSite {
            operation,
            site: OnceLock::new(),
            ..self
        }
    }

    /// The same settings with another schedule.
    pub(crate) fn with_policy(self, policy: Policy) -> Self {
        BuiltSite {
            policy,
            site: OnceLock::new(),
            ..self
        }
    }

    /// The same settings, consulting and feeding the system's breaker and bulkhead.
    pub(crate) fn protected(self) -> Self {
        BuiltSite {
            protect: true,
            site: OnceLock::new(),
            ..self
        }
    }

    /// The site, leaked on the first call for this value.
    pub(crate) fn get(&self) -> &'static Site {
        self.site
            .get_or_init(|| Site::leaked(self.system, self.operation, self.policy, self.protect))
    }
}
