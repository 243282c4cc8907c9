//! [`Limits`]: what one server accepts and holds — the largest request, the longest request,
//! and the bytes of partition data. One value the server and standalone configurations share
//! and the CLI builds from one set of flags, so a new limit is added here once.

use std::time::Duration;

use crate::net;

/// See the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest request accepted, in bytes; larger ones get RESOURCE_EXHAUSTED
    /// (`--max-message-bytes`).
    pub max_message_bytes: usize,
    /// Longest a request may take, body included; a stalled upload is cut off after it
    /// (`--request-timeout-secs`).
    pub request_timeout: Duration,
    /// Bytes of partition data the server may hold; creating partitions past it is refused
    /// with RESOURCE_EXHAUSTED (`--memory-budget`).
    pub memory_budget: u64,
}

impl Default for Limits {
    /// 256 MiB requests, two minutes each, and 80% of the machine's memory.
    fn default() -> Self {
        Limits {
            max_message_bytes: net::DEFAULT_MAX_MESSAGE_BYTES,
            request_timeout: net::DEFAULT_REQUEST_TIMEOUT,
            memory_budget: default_memory_budget(),
        }
    }
}

impl Limits {
    /// The limits of each of `servers` servers that share these: the memory budget divided
    /// equally, the per-request limits as they are.
    pub fn shared_by(self, servers: usize) -> Limits {
        Limits {
            memory_budget: self.memory_budget / servers.max(1) as u64,
            ..self
        }
    }
}

/// The default memory budget: 80% of the machine's memory as /proc/meminfo reports it, or
/// no limit where that cannot be read.
pub fn default_memory_budget() -> u64 {
    let total_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
    total_kib.map_or(u64::MAX, |kib| kib * 1024 / 5 * 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_sharing_limits_split_the_memory_and_keep_the_request_limits() {
        let total = Limits {
            max_message_bytes: 1000,
            request_timeout: Duration::from_secs(3),
            memory_budget: 10,
        };
        let each = total.shared_by(3);
        assert_eq!(each.memory_budget, 3);
        assert_eq!(each.max_message_bytes, 1000);
        assert_eq!(each.request_timeout, Duration::from_secs(3));
        assert_eq!(
            total.shared_by(0),
            total,
            "no servers: nothing to divide by"
        );
    }
}
