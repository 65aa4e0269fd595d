//! The durable queue's headline figures cannot go stale unnoticed. BENCHMARKS.md's summary
//! names the commit its durable figures were measured at; this test fails when
//! - the README's durable benchmark line is not the summary's, word for word, or
//! - a file of the durable store (`retry-runtime/src/durable/store/`) or of the worker's hot
//!   path ([`HOT_PATH`]) changed in git after that commit: the figures describe code that is
//!   gone. Re-measure (`cargo bench -p retry-benches --bench durable --features apalis`), then
//!   update the summary's line, its commit, and the README's copy.
//!
//! The second check asks `git` (a clone has `.git`); without git, or in a shallow clone that
//! lacks the named commit, it is skipped with a loud message on stderr, never passed silently.

use std::path::PathBuf;
use std::process::Command;

/// The files whose change makes the durable figures stale, relative to the workspace.
const HOT_PATH: &[&str] = &[
    "retry-runtime/src/durable/store/",
    // The count triggers run in every claim and completion statement (migration 7).
    "retry-runtime/migrations/postgres/",
    "retry-runtime/src/durable/worker/execution/processor.rs",
    "retry-runtime/src/durable/worker/execution/start.rs",
    "retry-runtime/src/durable/worker/execution/claim.rs",
    "retry-runtime/src/durable/worker/finishing/completer.rs",
    "retry-runtime/src/durable/worker/finishing/outcome.rs",
    "retry-runtime/src/durable/worker/finishing/settle.rs",
    "retry-runtime/src/durable/worker/execution/attempt.rs",
    "retry-runtime/src/durable/worker/execution/supervisor.rs",
    "retry-runtime/src/durable/worker/execution/runner.rs",
    "retry-runtime/src/durable/worker/lease.rs",
    "retry-runtime/src/durable/worker/maintenance/heartbeat.rs",
    "retry-runtime/src/durable/worker/execution/held.rs",
    "retry-runtime/src/durable/worker/execution/pace.rs",
    "retry-runtime/src/durable/worker/api/mod.rs",
    "retry-runtime/src/durable/protocol.rs",
];

/// The summary's durable line starts so, in BENCHMARKS.md and in the README.
const DURABLE_LINE: &str = "- Durable queue, no-op handler (";

/// The summary's line naming the commit: "… measured at commit `<hash>` …".
const MEASURED_AT: &str = "- Durable queue figures measured at commit `";

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn workspace_file(name: &str) -> String {
    let path = workspace().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of BENCHMARKS.md's `## Summary` section.
fn summary() -> Vec<String> {
    let benchmarks = workspace_file("BENCHMARKS.md");
    let start = benchmarks
        .find("\n## Summary\n")
        .expect("BENCHMARKS.md has a `## Summary` section");
    let rest = &benchmarks[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].lines().map(str::to_owned).collect()
}

fn durable_line(lines: &[String], file: &str) -> String {
    let found: Vec<&String> = lines
        .iter()
        .filter(|line| line.starts_with(DURABLE_LINE))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{file} must have exactly one line starting with {DURABLE_LINE:?}: {found:?}"
    );
    found[0].clone()
}

/// The commit the summary's durable figures were measured at.
fn measured_at() -> String {
    let summary = summary();
    let line = summary
        .iter()
        .find_map(|line| line.strip_prefix(MEASURED_AT))
        .unwrap_or_else(|| panic!("BENCHMARKS.md's summary has no line starting {MEASURED_AT:?}"));
    let commit = line.split('`').next().unwrap_or_default();
    assert!(
        commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit()),
        "the summary names no commit hash: {line:?}"
    );
    commit.to_owned()
}

#[test]
fn the_readme_durable_line_is_the_summary_line() {
    let summary = durable_line(&summary(), "BENCHMARKS.md's summary");
    let readme: Vec<String> = workspace_file("README.md")
        .lines()
        .map(str::to_owned)
        .collect();
    let readme = durable_line(&readme, "README.md");
    assert!(
        readme == summary,
        "the README's durable benchmark line differs from BENCHMARKS.md's summary (copy the \
         summary's):\nREADME:  {readme}\nsummary: {summary}"
    );
}

/// `git` with `args` in the workspace: its stdout, or `None` when git cannot be run there.
fn git(args: &[&str]) -> Option<(bool, String)> {
    let out = Command::new("git")
        .args(args)
        .current_dir(workspace())
        .output()
        .ok()?;
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    ))
}

fn skip(why: &str) {
    eprintln!(
        "\n*** benchmark_figures: the staleness check is SKIPPED: {why}. The durable figures \
         in BENCHMARKS.md are NOT checked against the code.\n"
    );
}

#[test]
fn the_durable_figures_were_measured_on_the_current_store() {
    let commit = measured_at();
    if !workspace().join(".git").exists() {
        return skip("no .git in the workspace");
    }
    let Some((true, _)) = git(&["rev-parse", "--git-dir"]) else {
        return skip("git is not available");
    };
    let object = format!("{commit}^{{commit}}");
    if git(&["cat-file", "-e", &object]).is_none_or(|(found, _)| !found) {
        if let Some((true, shallow)) = git(&["rev-parse", "--is-shallow-repository"])
            && shallow == "true"
        {
            return skip(&format!("a shallow clone without commit {commit}"));
        }
        panic!("BENCHMARKS.md's summary names commit {commit}, which this repository lacks");
    }
    let (ancestor, _) = git(&["merge-base", "--is-ancestor", &commit, "HEAD"]).expect("git");
    assert!(
        ancestor,
        "BENCHMARKS.md's summary names commit {commit}, which is not an ancestor of HEAD"
    );
    let range = format!("{commit}..HEAD");
    let mut args = vec!["log", "--max-count=30", "--format=%h %s", &range, "--"];
    args.extend(HOT_PATH);
    let (_, changed) = git(&args).expect("git log");
    assert!(
        changed.is_empty(),
        "the durable store or the worker's hot path changed after commit {commit}, where \
         BENCHMARKS.md's durable figures were measured: re-measure (`cargo bench -p \
         retry-benches --bench durable --features apalis`), then update the summary's durable \
         line, the commit it names, and the README's copy. Commits since:\n{changed}"
    );
}
