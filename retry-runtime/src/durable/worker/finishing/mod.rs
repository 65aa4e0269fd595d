//! What becomes of an attempt once it has ended: a failure judged and decided (`failure`,
//! `throttle`, `outcome`), every attempt's end as one value (`settle`: completed, retried,
//! archived, snoozed, deferred, given back, canceled) written in batches (`completer`), each
//! write retried by one policy (`write_retry`).

pub(crate) mod completer;
pub(crate) mod failure;
pub(crate) mod outcome;
pub(crate) mod settle;
pub(crate) mod throttle;
pub(crate) mod write_retry;
