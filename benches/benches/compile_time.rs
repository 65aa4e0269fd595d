//! Compile-time cost: a generated crate with 200 `#[retry]` async fns against the same 200 fns
//! plain, each built with `cargo build` (debug).
//!
//! Both crates are generated into `target/compile-bench/` (never committed), in a workspace of
//! their own with its own target directory and a copy of this workspace's `Cargo.lock` (the same
//! dependency versions). The dependencies are built first, once; then each crate is rebuilt
//! alone, non-incrementally (`CARGO_INCREMENTAL=0`, after touching its source), `RUNS` times,
//! alternating, and the median is reported. The same again with `cargo check` (expansion and
//! type checking without code generation). Both crates have the same dependencies
//! (retry-runtime, tokio), the same 200 bodies, and a fn that drives each of the 200 futures
//! (so that every one is compiled to machine code, not only type-checked).
//!
//! `cargo bench -p retry-benches --bench compile_time`

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Fns per generated crate.
const FNS: usize = 200;
/// Timed builds per crate.
const RUNS: usize = 5;

fn main() {
    let before = retry_benches::uptime();
    let root = retry_benches::target_dir().join("compile-bench");
    generate(&root).expect("the generated crates");

    let crates = ["gen-plain", "gen-retry"];
    let mut rows = Vec::new();
    for command in ["build", "check"] {
        let started = Instant::now();
        cargo(&root, &[command, "--workspace"], true);
        println!(
            "cargo {command}: dependencies and both crates, first time: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let mut times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..RUNS {
            for (name, times) in crates.iter().zip(&mut times) {
                touch(&root.join(name).join("src/lib.rs"));
                let started = Instant::now();
                cargo(&root, &[command, "-p", name, "--quiet"], false);
                times.push(started.elapsed());
            }
        }
        rows.push((command, times));
    }
    let after = retry_benches::uptime();

    let median = |times: &[Duration]| {
        let mut sorted = times.to_vec();
        sorted.sort();
        sorted[sorted.len() / 2]
    };
    let secs = |d: Duration| format!("{:.2}", d.as_secs_f64());
    println!(
        "\n## compile time: {FNS} async fns, debug, non-incremental, dependencies already built\n"
    );
    println!("| command | crate | median s | runs, s |");
    println!("| --- | --- | ---: | --- |");
    for (command, times) in &rows {
        for (name, times) in crates.iter().zip(times) {
            println!(
                "| `cargo {command}` | {name} ({FNS} fns{}) | {} | {} |",
                if *name == "gen-retry" {
                    " with #[retry]"
                } else {
                    ", plain"
                },
                secs(median(times)),
                times
                    .iter()
                    .map(|&t| secs(t))
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
    }
    println!();
    for (command, times) in &rows {
        let (plain, retry) = (median(&times[0]), median(&times[1]));
        println!(
            "cargo {command}: #[retry] / plain = {:.2}; per #[retry] fn: +{:.1} ms",
            retry.as_secs_f64() / plain.as_secs_f64(),
            (retry.as_secs_f64() - plain.as_secs_f64()) * 1e3 / FNS as f64
        );
    }
    println!(
        "\nuptime before: {}\nuptime after:  {}",
        before.unwrap_or_default(),
        after.unwrap_or_default()
    );
}

/// Runs cargo in the generated workspace, with its own target directory, non-incremental (the
/// path dependencies too: cargo would build them incrementally by default).
fn cargo(root: &Path, args: &[&str], show: bool) {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .args(args)
        .current_dir(root)
        .env("CARGO_TARGET_DIR", root.join("target"))
        .env("CARGO_INCREMENTAL", "0")
        .env_remove("CARGO_MAKEFLAGS")
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS");
    if !show {
        command.stdout(std::process::Stdio::null());
    }
    let status = command.status().expect("cargo runs");
    assert!(
        status.success(),
        "cargo {args:?} failed in {}",
        root.display()
    );
}

/// Marks a source file as changed.
fn touch(path: &Path) {
    let file = std::fs::File::options()
        .append(true)
        .open(path)
        .expect("the generated source");
    file.set_modified(std::time::SystemTime::now())
        .expect("set the modification time");
}

/// Writes the workspace: `gen-plain` and `gen-retry`.
fn generate(root: &Path) -> std::io::Result<()> {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let runtime = workspace.join("retry-runtime").canonicalize()?;
    std::fs::create_dir_all(root)?;
    std::fs::write(
        root.join("Cargo.toml"),
        "# Generated by `cargo bench -p retry-benches --bench compile_time`.\n\
         [workspace]\nresolver = \"3\"\nmembers = [\"gen-plain\", \"gen-retry\"]\n",
    )?;
    // The same dependency versions as the workspace (cargo drops the unused entries).
    std::fs::copy(workspace.join("Cargo.lock"), root.join("Cargo.lock"))?;
    for (name, attribute) in [
        ("gen-plain", ""),
        (
            "gen-retry",
            "#[retry_runtime::retry(read, attempts = 4, delay = \"10ms\", jitter = \"none\")]\n",
        ),
    ] {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("src"))?;
        std::fs::write(
            dir.join("Cargo.toml"),
            format!(
                "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
                 [dependencies]\nretry-runtime = {{ path = {runtime:?} }}\n\
                 tokio = {{ version = \"1\", default-features = false, features = [\"rt\", \"time\"] }}\n"
            ),
        )?;
        std::fs::write(dir.join("src/lib.rs"), source(attribute))?;
    }
    Ok(())
}

/// The crate: an error type, a fake server, `FNS` async fns and a driver that runs each.
fn source(attribute: &str) -> String {
    let mut source = String::from(
        "//! Generated by `cargo bench -p retry-benches --bench compile_time`.\n\n\
         use std::sync::atomic::{AtomicU32, Ordering};\n\n\
         #[derive(Debug)]\npub struct Unavailable(pub u32);\n\n\
         impl retry_runtime::Classify for Unavailable {\n    \
             fn is_transient(&self) -> bool {\n        true\n    }\n}\n\n\
         pub struct Server {\n    pub calls: AtomicU32,\n}\n\n\
         impl Server {\n    \
             pub fn call(&self, op: u32) -> Result<u32, Unavailable> {\n        \
                 let n = self.calls.fetch_add(1, Ordering::Relaxed);\n        \
                 if n % 7 == op % 7 { Err(Unavailable(op)) } else { Ok(n) }\n    \
             }\n}\n",
    );
    for i in 0..FNS {
        let _ = write!(
            source,
            "\n{attribute}pub async fn op_{i:03}(server: &Server) -> Result<u32, Unavailable> {{\n    \
                 server.call({i})\n}}\n"
        );
    }
    source.push_str(
        "\n/// Drives every fn once, so that each future is compiled to machine code.\n\
         pub fn run_all(rt: &tokio::runtime::Runtime, server: &Server) -> u32 {\n    \
             let mut ok = 0;\n",
    );
    for i in 0..FNS {
        let _ = writeln!(
            source,
            "    ok += u32::from(rt.block_on(op_{i:03}(server)).is_ok());"
        );
    }
    source.push_str("    ok\n}\n");
    source
}
