//! Transport limits both sides configure alike, so a bulk payload one side may send the other
//! accepts in as few frames and round trips as HTTP/2 allows.

/// HTTP/2 flow-control window (bytes) used by clients and servers alike.
pub const WINDOW: u32 = 64 << 20;

/// Largest HTTP/2 frame (bytes) clients and servers accept: the protocol's maximum, so bulk
/// payloads cross in few frames.
pub const MAX_FRAME: u32 = (1 << 24) - 1;
