//! The README's figures come from one place and are checked: the lines it quotes from
//! BENCHMARKS.md must stand there word for word, and the demo output it shows must be what
//! `cargo run --example payments` prints.

use std::path::PathBuf;

fn workspace_file(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of `text` between `<!-- {marker}: begin -->` and `<!-- {marker}: end -->`,
/// fences and blank lines left out.
fn between(text: &str, marker: &str) -> Vec<String> {
    let begin = format!("<!-- {marker}: begin -->");
    let end = format!("<!-- {marker}: end -->");
    let start = text
        .find(&begin)
        .unwrap_or_else(|| panic!("README has no `{begin}`"));
    let rest = &text[start + begin.len()..];
    let stop = rest
        .find(&end)
        .unwrap_or_else(|| panic!("README has no `{end}`"));
    rest[..stop]
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty() && !line.starts_with("```"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_benchmark_figure_the_readme_quotes_stands_in_benchmarks_md() {
    let readme = workspace_file("README.md");
    let benchmarks = workspace_file("BENCHMARKS.md");
    let quoted = between(&readme, "quoted from BENCHMARKS.md");
    assert!(
        quoted.len() >= 2,
        "the README quotes no benchmark: {quoted:?}"
    );
    let lines: Vec<&str> = benchmarks.lines().map(str::trim_end).collect();
    for line in &quoted {
        assert!(
            lines.contains(&line.as_str()),
            "the README quotes a line that BENCHMARKS.md does not have (update one from the \
             other):\n{line}"
        );
    }
}
