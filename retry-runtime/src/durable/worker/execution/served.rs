//! The queues a worker serves, each with its weight: checked once when the worker is built,
//! read by the processor's claims and by the due-time wait.

use crate::durable::client::queue::Queue;
use crate::durable::handle::Handle;

/// A queue a worker serves, and its weight.
#[derive(Clone)]
pub(crate) struct Served {
    pub(crate) queue: Queue,
    pub(crate) weight: u32,
}

impl AsRef<Handle> for Served {
    fn as_ref(&self) -> &Handle {
        &self.queue.handle
    }
}

impl Served {
    /// The queues `(name, weight)` of `base`'s database, checked.
    ///
    /// # Panics
    /// If the list is empty, names a queue twice, has a weight of 0, or a name that
    /// [`Queue::named`] refuses.
    pub(crate) fn list<I, S>(base: &Queue, queues: I) -> Vec<Served>
    where
        I: IntoIterator<Item = (S, u32)>,
        S: Into<String>,
    {
        let mut served: Vec<Served> = Vec::new();
        for (name, weight) in queues {
            let queue = base.clone().named(name);
            assert!(
                weight > 0,
                "queue {:?} has weight 0: give it at least 1",
                queue.name()
            );
            assert!(
                served.iter().all(|s| s.queue.name() != queue.name()),
                "queue {:?} is listed twice",
                queue.name()
            );
            served.push(Served { queue, weight });
        }
        assert!(!served.is_empty(), "a worker serves at least one queue");
        served
    }
}
