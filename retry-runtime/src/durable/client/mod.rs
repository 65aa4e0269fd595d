//! The client side: the [`Queue`](crate::durable::Queue) handle that enqueues and hands work
//! over, the [`Task`](crate::durable::Task) it writes (typed by [`kind`]) and the checks every
//! enqueue passes ([`prepare`]). Nothing here runs tasks; the worker's loop is in `durable/worker/`.

pub(crate) mod connect;
pub(crate) mod hand_over;
pub(crate) mod kind;
pub(crate) mod prepare;
pub(crate) mod queue;
pub(crate) mod task;
