//! Where a job keeps the tables it creates, and how much memory they may take: Angel's
//! storage levels for training data.
//!
//! - `memory`: every table in memory, as DataFusion keeps `CREATE TABLE` (the default
//!   without a memory limit).
//! - `disk`: every table on local disk as Arrow IPC, read back at each scan.
//! - `memory-and-disk`: tables in memory while the job's tables stay within half its memory
//!   limit, the rest on disk (the default with a limit). The other half is left to
//!   DataFusion's operators, which spill to disk when they reach it.

use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// See the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageLevel {
    /// Every table in memory.
    Memory,
    /// Every table on local disk.
    Disk,
    /// In memory within the budget, the rest on disk.
    MemoryAndDisk,
}

impl FromStr for StorageLevel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "memory" => Ok(StorageLevel::Memory),
            "disk" => Ok(StorageLevel::Disk),
            "memory-and-disk" => Ok(StorageLevel::MemoryAndDisk),
            _ => Err(format!(
                "storage level '{s}' is not one of memory, disk, memory-and-disk"
            )),
        }
    }
}

/// How one job keeps its tables: the level and what of its memory they may use.
#[derive(Debug)]
pub struct TableStorage {
    level: StorageLevel,
    /// Bytes tables may keep in memory (memory-and-disk).
    budget: usize,
    /// Bytes tables keep in memory now.
    used: AtomicUsize,
}

impl TableStorage {
    /// The storage for a job with `memory_limit` bytes (none: unlimited) at `level` (none:
    /// memory-and-disk with a limit, memory without).
    pub fn new(level: Option<StorageLevel>, memory_limit: Option<usize>) -> Self {
        let default = match memory_limit {
            Some(_) => StorageLevel::MemoryAndDisk,
            None => StorageLevel::Memory,
        };
        TableStorage {
            level: level.unwrap_or(default),
            budget: memory_limit.map_or(usize::MAX, |limit| limit / 2),
            used: AtomicUsize::new(0),
        }
    }

    /// The level tables are kept at.
    pub fn level(&self) -> StorageLevel {
        self.level
    }

    /// Whether a batch of `bytes` stays in memory; if so it counts against the budget until
    /// [`TableStorage::release`].
    pub fn admit(&self, bytes: usize) -> bool {
        match self.level {
            StorageLevel::Memory => true,
            StorageLevel::Disk => false,
            StorageLevel::MemoryAndDisk => self
                .used
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                    (used.saturating_add(bytes) <= self.budget).then_some(used + bytes)
                })
                .is_ok(),
        }
    }

    /// Returns `bytes` a dropped table kept in memory to the budget.
    pub fn release(&self, bytes: usize) {
        if self.level == StorageLevel::MemoryAndDisk {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
        }
    }
}

impl Default for TableStorage {
    fn default() -> Self {
        TableStorage::new(None, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_a_bad_one_is_named() {
        assert_eq!("memory-and-disk".parse(), Ok(StorageLevel::MemoryAndDisk));
        assert_eq!("DISK".parse(), Ok(StorageLevel::Disk));
        let err = "tape".parse::<StorageLevel>().unwrap_err();
        assert!(
            err.contains("'tape'") && err.contains("memory-and-disk"),
            "{err}"
        );
    }

    #[test]
    fn memory_and_disk_admits_within_half_the_limit() {
        let storage = TableStorage::new(None, Some(1000));
        assert_eq!(storage.level(), StorageLevel::MemoryAndDisk);
        assert!(storage.admit(300));
        assert!(storage.admit(200));
        assert!(!storage.admit(1), "the budget is half the limit");
        storage.release(200);
        assert!(storage.admit(150));
        let disk = TableStorage::new(Some(StorageLevel::Disk), None);
        assert!(!disk.admit(1));
        let memory = TableStorage::default();
        assert_eq!(memory.level(), StorageLevel::Memory);
        assert!(memory.admit(usize::MAX));
    }
}
