//! Transport limits both sides configure alike, so a bulk payload one side may send the other
//! accepts in as few frames and round trips as HTTP/2 allows.

/// HTTP/2 flow-control window (bytes) used by clients and servers alike.
pub const WINDOW: u32 = 64 << 20;

/// Largest HTTP/2 frame (bytes) clients and servers accept: the protocol's maximum, so bulk
/// payloads cross in few frames.
pub const MAX_FRAME: u32 = (1 << 24) - 1;

/// How long a job's run may go unheard before the master lets another run of the same job take
/// it over (the run was killed); a run renews its hold five times per lease.
pub const JOB_LEASE: std::time::Duration = std::time::Duration::from_secs(5);
