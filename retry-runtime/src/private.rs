//! What `#[retry]` expansions call. Not a public API: it changes with the macro, which is
//! pinned to this exact version of the runtime. A door, not a room: everything here lives in a
//! module named for what it is.

pub use tokio::time::sleep;

pub use crate::ambient::{Cause, InHandOver, in_hand_over, in_hand_over_sync};
pub use crate::attempt::{Attempt, attempt, attempt_blocking};
pub use crate::classify::{Hint, Verdict};
pub use crate::describe::{Describe, ErrorText, ViaDebug, ViaDisplay, ViaError, ViaNothing};
pub use crate::erased::registered::{Downcast, DowncastError, DowncastNothing, Registered};
pub use crate::give_up::GiveUp;
pub use crate::hedge::{HedgeSite, Hedged, HedgedNext, hedge_site};
pub use crate::protect::{FromRejected, Permit, from_rejected};
pub use crate::result::RetryResult;
pub use crate::retrier::admission::{Queued, Reject, Wait, enter};
pub use crate::retrier::fallback::FallNext;
pub use crate::retrier::hand_over::handed_over::{Mark, MarkCarried, MarkNothing};
pub use crate::retrier::hand_over::{HandOff, Next};
pub use crate::retrier::{Retrier, key, sleep_blocking};
pub use crate::site::{Site, SiteEntry, site};
pub use crate::timeout::{FromTimeout, from_timeout, timed};
pub use inventory;
