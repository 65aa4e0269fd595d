//! Running tasks: the processor claims due tasks (`claim`, through the per-system `gate` and
//! its `limit`s and `ramp`s, on the `lease`), starts them in free slots (`start`, paced by
//! `pace`, woken by the handle's `wake` and the `due` timer), and runs each attempt (`attempt`, watched by
//! its `supervisor`, with the `runner`'s `handlers`, inside its `span`), until its graceful
//! `stopping`.

pub(crate) mod attempt;
pub(crate) mod claim;
pub(crate) mod due;
pub(crate) mod gate;
pub(crate) mod held;
pub(crate) mod limit;
pub(crate) mod pace;
pub(crate) mod processor;
pub(crate) mod ramp;
pub(crate) mod runner;
pub(crate) mod served;
pub(crate) mod shared_breaker;
pub(crate) mod span;
pub(crate) mod start;
pub(crate) mod stopping;
pub(crate) mod supervisor;
