//! The handler every kind shares: gates (`gated`), work, the side effect, and the event log.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use retry_runtime::BoxError;
use retry_runtime::durable::ActiveTask;

use crate::effects::{Effect, Effects};

/// What the handlers do: see the crate's documentation (`main.rs`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Fleet,
    Gated,
}

/// One line per event, flushed at once: the test reads the file while the process runs (or
/// after it was killed).
#[derive(Clone)]
pub(crate) struct Log(pub(crate) Arc<Mutex<File>>);

impl Log {
    pub(crate) fn line(&self, line: &str) {
        let mut file = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        file.write_all(format!("{line}\n").as_bytes())
            .expect("write the event log");
        file.flush().expect("flush the event log");
    }

    fn event(&self, what: &str, task: &ActiveTask) {
        let pid = std::process::id();
        self.line(&format!("{what} {} {} {pid}", task.id(), task.retried()));
    }
}

/// Logs `dropped …` unless disarmed: the worker dropped the handler's future (a lost lease, a
/// shutdown) before it ended.
struct DropWitness<'a> {
    log: &'a Log,
    task: &'a ActiveTask,
    armed: bool,
}

impl Drop for DropWitness<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.log.event("dropped", self.task);
        }
    }
}

/// Waits until the file `{stem}.{which}` exists, checking every 5 ms.
async fn gate(stem: &Path, which: &str) {
    let mut path = stem.as_os_str().to_owned();
    path.push(format!(".{which}"));
    let path = PathBuf::from(path);
    while !path.exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Everything a handler needs, shared by the handlers of every kind.
pub(crate) struct Ctx {
    pub(crate) log: Log,
    pub(crate) effects: Effects,
    pub(crate) queue: String,
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) mode: Mode,
    pub(crate) gates: Option<PathBuf>,
}

pub(crate) async fn handle(ctx: Arc<Ctx>, task: ActiveTask) -> Result<(), BoxError> {
    let mut witness = DropWitness {
        log: &ctx.log,
        task: &task,
        armed: true,
    };
    ctx.log.event("start", &task);
    let gates = match (&ctx.mode, &ctx.gates) {
        (Mode::Gated, Some(dir)) => Some(dir.join(format!("{}.{}", task.id(), task.retried()))),
        _ => None,
    };
    if let Some(gates) = &gates {
        gate(gates, "write").await;
    }
    let effect = Effect {
        task: &task,
        queue: &ctx.queue,
        worker: &ctx.name,
        version: &ctx.version,
    };
    let written = ctx.effects.record(&effect, ctx.mode == Mode::Gated).await?;
    ctx.log
        .event(if written { "effect" } else { "refused" }, &task);
    if let Some(gates) = &gates {
        gate(gates, "return").await;
    }
    ctx.log.event("ok", &task);
    witness.armed = false;
    Ok(())
}
