//! What the tests of the examples share: where cargo put the example binaries they run.

use std::path::{Path, PathBuf};

/// `target/<profile>/examples/payments`, next to this test's own `deps/` directory.
pub(crate) fn demo_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>");
    profile_dir
        .join("examples")
        .join(format!("payments{}", std::env::consts::EXE_SUFFIX))
}
