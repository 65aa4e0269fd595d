//! The numbered migrations of each backend, one `.up.sql` and one `.down.sql` per version under
//! `retry-runtime/migrations/{postgres,sqlite}/`, embedded in the binary. A new version is a
//! new pair of files and a new line in [`POSTGRES`] and [`SQLITE`]; a test checks that every
//! file is listed and that both backends have the same versions.

use sha2::{Digest as _, Sha256};

/// One version of the schema.
#[derive(Debug)]
pub(crate) struct Migration {
    /// 1, 2, …: the order they are applied in.
    pub(crate) version: i64,
    /// The file name's words: `0001_baseline` is `baseline`.
    pub(crate) name: &'static str,
    pub(crate) up: &'static str,
    pub(crate) down: &'static str,
    /// The oldest schema version whose code keeps working with this migration applied: one
    /// below its own version for a change that only adds (a table, a nullable column, an index,
    /// which older statements never name), so that the build before it runs on during a
    /// rolling upgrade; its own version for a change older code cannot live with.
    pub(crate) oldest_reader: i64,
}

impl Migration {
    /// The SHA-256 of the up text, hex: a database that recorded another one for this version
    /// was migrated by a text that has since changed.
    pub(crate) fn checksum(&self) -> String {
        Sha256::digest(self.up.as_bytes())
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }
}

/// `migration!(backend, version, "NNNN_name", oldest_reader)`.
macro_rules! migration {
    ($backend:literal, $version:literal, $file:literal, $name:literal, $oldest_reader:literal) => {
        Migration {
            version: $version,
            name: $name,
            up: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/migrations/",
                $backend,
                "/",
                $file,
                ".up.sql"
            )),
            down: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/migrations/",
                $backend,
                "/",
                $file,
                ".down.sql"
            )),
            oldest_reader: $oldest_reader,
        }
    };
}

/// PostgreSQL's migrations, in order.
#[cfg(feature = "postgres")]
pub(crate) const POSTGRES: &[Migration] = &[
    migration!("postgres", 1, "0001_baseline", "baseline", 1),
    migration!("postgres", 2, "0002_leaders", "leaders", 1),
    migration!("postgres", 3, "0003_breakers", "breakers", 2),
    migration!("postgres", 4, "0004_prefetch", "prefetch", 3),
    migration!("postgres", 5, "0005_reasons", "reasons", 4),
    migration!("postgres", 6, "0006_probes", "probes", 5),
    migration!("postgres", 7, "0007_stripes", "stripes", 6),
];

/// SQLite's migrations, in order.
#[cfg(feature = "sqlite")]
pub(crate) const SQLITE: &[Migration] = &[
    migration!("sqlite", 1, "0001_baseline", "baseline", 1),
    migration!("sqlite", 2, "0002_leaders", "leaders", 1),
    migration!("sqlite", 3, "0003_breakers", "breakers", 2),
    migration!("sqlite", 4, "0004_prefetch", "prefetch", 3),
    migration!("sqlite", 5, "0005_reasons", "reasons", 4),
    migration!("sqlite", 6, "0006_probes", "probes", 5),
    migration!("sqlite", 7, "0007_stripes", "stripes", 6),
];

#[cfg(all(test, feature = "sqlite", feature = "postgres"))]
mod tests {
    use super::{Migration, POSTGRES, SQLITE};

    fn files(backend: &str) -> Vec<String> {
        let dir = format!("{}/migrations/{backend}", env!("CARGO_MANIFEST_DIR"));
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("the migrations directory")
            .map(|entry| {
                entry
                    .expect("an entry")
                    .file_name()
                    .into_string()
                    .expect("utf-8")
            })
            .collect();
        names.sort();
        names
    }

    fn listed(migrations: &[Migration]) -> Vec<String> {
        let mut names: Vec<String> = migrations
            .iter()
            .flat_map(|m| {
                let stem = format!("{:04}_{}", m.version, m.name);
                [format!("{stem}.down.sql"), format!("{stem}.up.sql")]
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn every_file_is_listed_once_and_the_versions_count_up_from_one() {
        for (backend, migrations) in [("postgres", POSTGRES), ("sqlite", SQLITE)] {
            assert_eq!(files(backend), listed(migrations), "{backend}");
            for (i, m) in migrations.iter().enumerate() {
                assert_eq!(m.version, i as i64 + 1, "{backend} {}", m.name);
                assert!(m.oldest_reader <= m.version && m.oldest_reader >= 1);
            }
        }
    }

    #[test]
    fn both_backends_have_the_same_versions_and_names() {
        let versions = |ms: &[Migration]| -> Vec<(i64, &str, i64)> {
            ms.iter()
                .map(|m| (m.version, m.name, m.oldest_reader))
                .collect()
        };
        assert_eq!(versions(POSTGRES), versions(SQLITE));
    }

    #[test]
    fn a_checksum_is_the_sha256_of_the_up_text() {
        let m = &SQLITE[0];
        assert_eq!(m.checksum().len(), 64);
        assert_ne!(m.checksum(), POSTGRES[0].checksum());
    }
}
