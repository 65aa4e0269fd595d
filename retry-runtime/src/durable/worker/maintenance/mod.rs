//! The worker's periodic components, beside the processor (`periodic`): the `heartbeat` (who
//! runs what, the queues' `leadership`, the storage watched for what is `fatal`), and on the
//! queues it leads the `recoverer` (expired leases) and the `janitor` (finished tasks' limits).

pub(crate) mod fatal;
pub(crate) mod heartbeat;
pub(crate) mod janitor;
pub(crate) mod leadership;
pub(crate) mod recoverer;
