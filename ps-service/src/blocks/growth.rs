//! [`Growth`]: what a write may add to the memory of the rows it touches, as the memory
//! account reserves it before the write (see `server::memory`).

/// The bytes a write may take: what its rows keep, and the largest table it holds twice at
/// once (a growing table is built while the old one is held; a write grows its tables one
/// after another, so only the largest old table counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Growth {
    /// Bytes the rows hold more once written.
    pub kept: u64,
    /// Bytes of the largest old table held while its replacement is built.
    pub transient: u64,
}

impl Growth {
    /// The growth of a table of `before` bytes that holds `after` once written, the last of
    /// whose growth steps started from at most `last_from` bytes (or from `before`, when one
    /// step went the whole way).
    pub fn of_table(before: u64, after: u64, last_from: u64) -> Growth {
        match after > before {
            true => Growth {
                kept: after - before,
                transient: before.max(last_from.min(after)),
            },
            false => Growth::default(),
        }
    }

    /// This write's and `other`'s together.
    pub fn and(self, other: Growth) -> Growth {
        Growth {
            kept: self.kept.saturating_add(other.kept),
            transient: self.transient.max(other.transient),
        }
    }

    /// The bytes to reserve.
    pub fn bytes(self) -> u64 {
        self.kept.saturating_add(self.transient)
    }
}
