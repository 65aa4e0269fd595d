//! The token's rules as figures: where it is read from and how long and varied it must be. A
//! bottom-layer file: the token's checks (`token.rs`) and their refusals (`dash_error.rs`) read it.

/// The environment variable holding the token: `RETRY_QUEUE_TOKEN`.
pub const TOKEN_ENV: &str = "RETRY_QUEUE_TOKEN";

/// The shortest token accepted, in characters (after trimming): 16.
pub const MIN_TOKEN_LEN: usize = 16;

/// The fewest different characters a token must have: 8.
pub const MIN_TOKEN_DISTINCT: usize = 8;

/// The most bytes read from a token file: 4 KiB (a larger file is refused).
pub const MAX_TOKEN_FILE_BYTES: u64 = 4096;
