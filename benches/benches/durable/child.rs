//! The peers' crashed worker: a child process of this bench, killed with SIGKILL while its
//! handler holds the crash task (a peer's worker spawns tasks of its own, heartbeats and its
//! leader's maintenance, which aborting one tokio task would leave running: only a killed
//! process is a crashed worker for them).

use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::measure::now_us;

/// The env var that makes this binary the worker a crash-recovery run kills (see [`Crashing`]):
/// `<peer> <database URL>`.
pub(crate) const CHILD_ENV: &str = "DURABLE_BENCH_CRASH_CHILD";
/// What the crashing child prints once its handler holds the task.
const HOLDING: &str = "holding the crash task";

/// A worker in a child process of this bench (this binary, with [`CHILD_ENV`] set to
/// `role` and `url`).
pub(crate) struct Crashing {
    child: Child,
}

impl Crashing {
    /// Starts the child worker of `role` on `url` and waits, bounded, until it prints that its
    /// handler holds the task.
    pub(crate) fn start(role: &str, url: &str) -> Result<Crashing, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
        let mut child = Command::new(exe)
            .env(CHILD_ENV, format!("{role} {url}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawn the crashing worker: {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains(HOLDING) {
                    let _ = tx.send(());
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(()) => Ok(Crashing { child }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                Err("the crashing worker never picked the task up within 60 s".to_owned())
            }
        }
    }

    /// SIGKILL; returns the time of the kill, µs since the epoch.
    pub(crate) fn kill(mut self) -> u64 {
        let _ = self.child.kill();
        let killed = now_us();
        let _ = self.child.wait();
        killed
    }
}

/// In the child: says that the handler holds the crash task, then hangs until killed.
pub(crate) async fn hold_until_killed() {
    println!("{HOLDING}");
    std::future::pending::<()>().await;
}

/// Whether this process is a crashing child worker (see [`Crashing`]).
pub(crate) fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}
