//! What becomes of an attempt once it has ended: a failure judged and decided (`failure`,
//! `throttle`), the decision written (`outcome`), completions written in batches
//! (`completer`), each write retried by one policy (`write_retry`).

pub(crate) mod completer;
pub(crate) mod failure;
pub(crate) mod outcome;
pub(crate) mod throttle;
pub(crate) mod write_retry;
