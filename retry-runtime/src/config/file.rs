//! The configuration file (feature `toml`): `[systems.<name>]` tables whose keys are the
//! variables' keys in lower case.

use std::path::Path;

use super::keys;
use super::report::Report;
use super::tighten::{BySystem, Given};

/// The values of the file at `path`, by system; or a report refusing the whole file.
pub(super) fn read(path: &Path) -> Result<(BySystem, Report), Report> {
    let shown = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| whole(&shown, format!("cannot be read: {e}")))?;
    parse(&shown, &text)
}

/// A report refusing the whole of `shown` (a file's path, or the TOML text's stand-in).
fn whole(shown: &str, why: String) -> Report {
    let mut report = Report::default();
    report.refuse(shown, "(the whole file)", why);
    report
}

/// The values of `text`, a file's TOML (`shown` names it in refusals), by system; or a report
/// refusing the whole text.
pub(super) fn parse(shown: &str, text: &str) -> Result<(BySystem, Report), Report> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        whole(shown, format!("is not valid TOML: {}", e.message()))
    })?;
    let (mut given, mut report) = (BySystem::new(), Report::default());
    for (name, value) in &table {
        let source = format!("{shown}: {name}");
        match (name.as_str(), value) {
            ("systems", toml::Value::Table(systems)) => {
                for (system, keys) in systems {
                    let source = format!("{shown}: systems.{system}");
                    let toml::Value::Table(keys) = keys else {
                        report.refuse(
                            &source,
                            keys.type_str(),
                            "expected a table: `[systems.<name>]` with `key = value` lines",
                        );
                        continue;
                    };
                    for (key, value) in keys {
                        given
                            .entry(system.clone())
                            .or_default()
                            .push(entry(&source, key, value));
                    }
                }
            }
            _ => report.refuse(
                &source,
                value.type_str(),
                "the file holds `[systems.<name>]` tables only",
            ),
        }
    }
    Ok((given, report))
}

/// One `key = value` line.
fn entry(table: &str, key: &str, value: &toml::Value) -> Given {
    let text = match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(n) => n.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => if *b { "on" } else { "off" }.to_owned(),
        other => other.type_str().to_owned(),
    };
    let upper = key.to_ascii_uppercase();
    let value = if key == upper.to_ascii_lowercase() && keys::KEYS.contains(&upper.as_str()) {
        keys::read(&upper, &text)
    } else {
        let fix = keys::nearest(key, keys::KEYS.iter().copied()).unwrap_or(keys::KEYS[0]);
        // The file writes keys in lower case: so does the refusal, the list of keys included.
        Err(keys::unknown(&format!("`{key}`"), &fix.to_ascii_lowercase()).to_ascii_lowercase())
    };
    Given {
        source: format!("{table}.{key}"),
        text,
        value,
    }
}
