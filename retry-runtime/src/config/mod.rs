//! Configuration an operator can change during an incident, per external system, without a
//! rebuild: `RETRY_<SYSTEM>_<KEY>` variables or a TOML file's `[systems.<name>]` tables (feature
//! `toml`), each a [`Source`] given to [`apply`] or [`reload`], **tighten-only**.
//!
#![doc = include_str!("../../docs/config.md")]

mod effective;
mod keys;
mod queue;
mod report;
mod source;
mod state;
mod tighten;

#[cfg(feature = "toml")]
mod file;

use std::sync::{Mutex, PoisonError};

pub(crate) use effective::effective;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use queue::{QueueLimits, code_set as queue_limits_code_set, limits as queue_limits};
pub use report::{Applied, Refusal, Report};
pub use source::Source;
pub(crate) use state::protections;

use crate::protect;
use crate::system::known_systems;
use tighten::{BySystem, Given};

/// Serialises configuration calls: each builds a whole map, swaps it in, then brings every
/// system's breaker and bulkhead up to date.
static APPLYING: Mutex<()> = Mutex::new(());

/// Reads `source` and puts into effect every value that tightens what the code compiled;
/// refuses the others (the compiled value stays). Replaces any configuration applied before.
///
/// From variables ([`Source::Env`], [`Source::Vars`]): every `RETRY_…` variable that names a
/// known key but no system the program knows (no `#[retry]` site, budget, breaker or bulkhead
/// names it, nor a tower layer or reqwest middleware that has served a request) is refused, and
/// so is every `RETRY_<SYSTEM>_…` of a known system whose key is none of ours (naming the
/// nearest key: `RETRY_PAYMENTS_ATTEMPT`, did you mean `RETRY_PAYMENTS_ATTEMPTS`?); other
/// `RETRY_…` variables are not ours and are left alone.
///
/// From TOML ([`Source::File`], [`Source::Toml`], feature `toml`): the `[systems.<name>]`
/// tables (keys as in the variables, lower-case: `attempts = 2`, `delay = "300ms"`,
/// `retries = "off"`). A file that cannot be read or parsed is refused as a whole: the report
/// says why, and nothing changes. A key the file misspells, or a table of a system the program
/// does not know, is refused naming the nearest known one.
///
/// ```
/// use retry_runtime::config::{self, Source};
///
/// // RETRY_PAYMENTS_ATTEMPTS=2 RETRY_PAYMENTS_BULKHEAD=20 ./server
/// let report = config::apply(Source::Env);
/// for refused in &report.refused {
///     eprintln!("{refused}");
/// }
/// ```
pub fn apply(source: Source) -> Report {
    match source.read() {
        Ok(given) => put_into_effect(given, Partial::Allowed),
        Err(report) => report,
    }
}

/// [`apply`] as a reload: the whole new configuration, or nothing. When any value is refused
/// (or a file cannot be read or parsed) the configuration in force stays as it was and the
/// report comes back as the error.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("retry.toml");
/// use retry_runtime::config::{self, Source};
///
/// // A system the program knows: a `#[retry]` site names it, or a budget, breaker or bulkhead.
/// retry_runtime::system("payments").set_bulkhead(retry_runtime::Bulkhead::new(20));
/// std::fs::write(&path, "[systems.payments]\nretries = \"off\"\n").unwrap();
/// let report = config::reload(Source::File(path.clone())).unwrap();
/// assert_eq!(report.applied.len(), 1, "{report}");
/// ```
pub fn reload(source: Source) -> Result<Report, Report> {
    whole(put_into_effect(source.read()?, Partial::Refused))
}

/// Whether a configuration with refused values is applied (its other values) or not at all.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Partial {
    Allowed,
    Refused,
}

fn whole(report: Report) -> Result<Report, Report> {
    if report.is_clean() {
        Ok(report)
    } else {
        Err(report)
    }
}

/// The `RETRY_<SYSTEM>_<KEY>` pairs, by system: the longest known system whose name leads to a
/// known key wins (`RETRY_PAYMENTS_EU_ATTEMPTS` is `payments_eu`'s if it exists).
fn read_vars<I, K, V>(vars: I) -> (BySystem, Report)
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let systems: Vec<(String, &str)> = known_systems()
        .into_iter()
        .map(|s| (keys::env_name(s), s))
        .collect();
    let (mut given, mut report) = (BySystem::new(), Report::default());
    for (name, text) in vars {
        let (name, text) = (name.as_ref(), text.as_ref());
        let Some(rest) = name.strip_prefix("RETRY_") else {
            continue;
        };
        let matched = systems
            .iter()
            .filter_map(|(env, system)| {
                let key = rest.strip_prefix(env.as_str())?.strip_prefix('_')?;
                keys::KEYS
                    .contains(&key)
                    .then_some((env.len(), key, *system))
            })
            .max_by_key(|(len, ..)| *len);
        let entry = |key: &str| Given {
            source: name.to_owned(),
            text: text.to_owned(),
            value: keys::read(key, text),
        };
        match matched {
            Some((len, key, _)) => {
                // Every system with this variable name (`pay-ments` and `pay_ments`).
                for (_, system) in systems
                    .iter()
                    .filter(|(env, _)| env.len() == len && rest.starts_with(env.as_str()))
                {
                    given
                        .entry((*system).to_owned())
                        .or_default()
                        .push(entry(key));
                }
            }
            None => refuse_unmatched(name, text, rest, &systems, &mut report),
        }
    }
    (given, report)
}

/// A `RETRY_…` variable (`rest` after the prefix) that names no known key of a known system:
/// refused when it names a known key (of a system the program does not know) or a known system
/// (with a key it does not know: the nearest one is the fix); left alone otherwise, as another
/// program's variable.
fn refuse_unmatched(
    name: &str,
    text: &str,
    rest: &str,
    systems: &[(String, &str)],
    report: &mut Report,
) {
    let listed = || {
        let each: Vec<String> = systems.iter().map(|(_, s)| format!("`{s}`")).collect();
        each.join(", ")
    };
    if let Some(key) = keys::KEYS
        .iter()
        .filter(|k| rest.ends_with(&format!("_{k}")))
        .max_by_key(|k| k.len())
    {
        let system = &rest[..rest.len() - key.len() - 1];
        let why = format!(
            "no system named like `{system}`: the systems this program knows are {}",
            listed()
        );
        report.refuse(name, text, why);
        return;
    }
    // `RETRY_<SYSTEM>_` of a system of ours is ours: a key after it that is none of ours is a
    // misspelt one (`RETRY_PAYMENTS_ATTEMPT`), refused with the nearest key as the fix.
    let of_known = systems
        .iter()
        .filter_map(|(env, system)| {
            let key = rest.strip_prefix(env.as_str())?.strip_prefix('_')?;
            Some((env, key, *system))
        })
        .max_by_key(|(env, ..)| env.len());
    if let Some((env, key, system)) = of_known {
        let fix = keys::nearest(key, keys::KEYS.iter().copied()).unwrap_or(keys::KEYS[0]);
        let what = format!("`{key}` of system `{system}`");
        report.refuse(
            name,
            text,
            keys::unknown(&what, &format!("RETRY_{env}_{fix}")),
        );
    }
}

/// A file's tables of systems the program does not know: each value refused, naming the
/// nearest known system. A file of this configuration holds no other program's tables, so a
/// misspelt system (`[systems.paymnets]`) would otherwise change nothing in silence.
#[cfg(feature = "toml")]
fn unknown_systems((mut given, mut report): (BySystem, Report)) -> (BySystem, Report) {
    let known = known_systems();
    given.retain(|system, values| {
        if known.contains(&system.as_str()) {
            return true;
        }
        let why = match keys::nearest(system, known.iter().copied()) {
            Some(fix) => format!(
                "no system named `{system}`: did you mean `[systems.{fix}]`? The systems this program knows are {}",
                known.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
            ),
            None => format!("no system named `{system}`: this program knows no system yet"),
        };
        for g in values.iter() {
            report.refuse(&g.source, &g.text, why.clone());
        }
        false
    });
    (given, report)
}

/// Checks every value, builds the new map and, unless refusals forbid it, puts it into effect.
fn put_into_effect((given, mut report): (BySystem, Report), partial: Partial) -> Report {
    let _applying = APPLYING.lock().unwrap_or_else(PoisonError::into_inner);
    let mut map = state::Map::new();
    for (system, values) in &given {
        let code = protect::lookup(system)
            .map(|p| p.code())
            .unwrap_or_default();
        let sites: Vec<_> = crate::site::listed::of(system).collect();
        let queue = queue::coded(system);
        let overrides = tighten::system(system, values, code, queue, &sites, &mut report);
        map.insert(system.as_str().into(), overrides);
    }
    if partial == Partial::Refused && !report.is_clean() {
        report.applied.clear();
        report.log();
        return report;
    }
    // The protections ask the configuration for what is in effect through this seam: they sit
    // below it and do not name it.
    protect::tighten_with(protections);
    state::swap(map);
    for system in given.keys() {
        protect::for_system(system);
    }
    for protection in protect::all() {
        crate::systems::refresh(protection);
    }
    report.log();
    report
}
