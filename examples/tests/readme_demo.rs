//! The README shows the payments demo's last lines; this runs the demo (the example binary
//! that `cargo test` builds beside the tests) and fails when they drift apart.

use std::path::Path;
use std::process::Command;

mod common;
use common::demo_binary;

/// The README's demo block: the lines between the markers, fences left out.
fn readme_demo_lines() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md");
    let begin = "<!-- demo output: begin -->";
    let end = "<!-- demo output: end -->";
    let start = readme
        .find(begin)
        .expect("README has the demo output's begin marker")
        + begin.len();
    let stop = start
        + readme[start..]
            .find(end)
            .expect("README has the end marker");
    readme[start..stop]
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty() && !line.starts_with("```"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_readme_shows_what_the_payments_demo_prints() {
    let binary = demo_binary();
    assert!(
        binary.exists(),
        "{} is missing: `cargo test -p retry-examples` (or `cargo test --workspace`) builds the \
         examples before running this test",
        binary.display()
    );
    let output = Command::new(&binary)
        .output()
        .expect("the payments demo runs");
    assert!(
        output.status.success(),
        "the demo failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    let printed: Vec<&str> = stdout
        .lines()
        .skip_while(|line| !line.starts_with("orders: "))
        .collect();
    let shown = readme_demo_lines();
    assert!(
        shown.len() >= 10,
        "the README shows no demo output: {shown:?}"
    );
    assert_eq!(
        shown, printed,
        "the README's demo output (left) is not what `cargo run --example payments` prints \
         (right): update the README"
    );
}
