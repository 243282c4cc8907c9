//! What a reader does with a row it cannot parse, and the report of the rows it skipped.

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

/// The choice a job makes for rows that do not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BadRowPolicy {
    /// Stop with an error naming the file, line and problem (the default).
    #[default]
    Fail,
    /// Skip the row, count it, and report it at the end.
    Skip,
}

impl FromStr for BadRowPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "fail" | "error" => Ok(BadRowPolicy::Fail),
            "skip" => Ok(BadRowPolicy::Skip),
            _ => Err(format!("bad_rows must be 'fail' or 'skip', got '{s}'")),
        }
    }
}

/// One row that did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRow {
    /// The file it came from.
    pub file: String,
    /// 1-based line number.
    pub line: u64,
    /// What was wrong with it.
    pub reason: String,
}

impl fmt::Display for BadRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.reason)
    }
}

/// Skipped rows kept for the end-of-job report: the first [`BadRows::KEEP`] in full, the
/// rest counted.
#[derive(Debug, Default)]
pub struct BadRows {
    rows: Vec<BadRow>,
    count: u64,
}

impl BadRows {
    /// Rows kept in full.
    pub const KEEP: usize = 20;

    /// Records a skipped row.
    pub fn push(&mut self, row: BadRow) {
        self.count += 1;
        if self.rows.len() < Self::KEEP {
            self.rows.push(row);
        }
    }

    /// Number of skipped rows.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The first skipped rows.
    pub fn first(&self) -> &[BadRow] {
        &self.rows
    }
}

/// The process-wide report of skipped rows, which a job prints when it ends.
pub fn skipped() -> &'static Mutex<BadRows> {
    static SKIPPED: Mutex<BadRows> = Mutex::new(BadRows {
        rows: Vec::new(),
        count: 0,
    });
    &SKIPPED
}

/// Applies `policy` to a bad row: an error to fail with, or `None` once it is recorded.
pub fn handle(policy: BadRowPolicy, row: BadRow) -> Option<BadRow> {
    match policy {
        BadRowPolicy::Fail => Some(row),
        BadRowPolicy::Skip => {
            tracing::debug!(%row, "skipping a bad row");
            skipped().lock().expect("bad-row report").push(row);
            None
        }
    }
}
