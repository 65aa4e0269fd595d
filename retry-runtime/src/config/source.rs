//! Where a configuration comes from: the process's environment, given variables, or TOML (a
//! file's path or its text). [`apply`](super::apply) and [`reload`](super::reload) take one.

use super::report::Report;
use super::tighten::BySystem;

/// Where [`apply`](super::apply) and [`reload`](super::reload) read the configuration from.
///
/// ```
/// use retry_runtime::config::Source;
///
/// let env = Source::Env;
/// let given = Source::vars([("RETRY_PAYMENTS_RETRIES", "off")]);
/// # let _ = (env, given);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The process's `RETRY_<SYSTEM>_<KEY>` variables (those whose name and value are UTF-8).
    Env,
    /// The given `(name, value)` pairs, read like the environment's variables
    /// ([`Source::vars`] builds it from any pairs of strings).
    Vars(Vec<(String, String)>),
    /// The TOML file at this path: its `[systems.<name>]` tables (feature `toml`).
    #[cfg(feature = "toml")]
    File(std::path::PathBuf),
    /// A file's TOML given as text (feature `toml`); refusals name it `(TOML text)`.
    #[cfg(feature = "toml")]
    Toml(String),
}

impl Source {
    /// [`Source::Vars`] from any `(name, value)` pairs of strings.
    pub fn vars<I, K, V>(vars: I) -> Source
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let pairs = vars.into_iter();
        Source::Vars(
            pairs
                .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
                .collect(),
        )
    }

    /// [`Source::File`] of `path` (feature `toml`).
    #[cfg(feature = "toml")]
    pub fn file(path: impl AsRef<std::path::Path>) -> Source {
        Source::File(path.as_ref().to_owned())
    }

    /// The values it gives, by system, with the refusals of reading them; or a report refusing
    /// it whole (a file that cannot be read, TOML that does not parse).
    pub(super) fn read(self) -> Result<(BySystem, Report), Report> {
        match self {
            Source::Env => Ok(super::read_vars(std::env::vars_os().filter_map(
                |(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)),
            ))),
            Source::Vars(pairs) => Ok(super::read_vars(pairs)),
            #[cfg(feature = "toml")]
            Source::File(path) => super::file::read(&path).map(super::unknown_systems),
            #[cfg(feature = "toml")]
            Source::Toml(text) => {
                super::file::parse("(TOML text)", &text).map(super::unknown_systems)
            }
        }
    }
}
