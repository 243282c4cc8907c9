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

/// Rows skipped over some span of a job: how many, and the first [`BadRows::KEEP`] of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Number of skipped rows.
    pub count: u64,
    /// The first of them, in full.
    pub first: Vec<BadRow>,
}

/// The rows one job skipped, for its reports. Each job owns one and hands it to its readers
/// (which may run on several threads), so two jobs in one process never mix their reports.
#[derive(Debug, Default)]
pub struct BadRows {
    skipped: Mutex<Skipped>,
}

impl BadRows {
    /// Rows kept in full.
    pub const KEEP: usize = 20;

    /// Records a skipped row. Readers parse blocks of a file in parallel, so rows arrive out
    /// of order: the report keeps the first [`BadRows::KEEP`] by file and line, not by arrival.
    pub fn push(&self, row: BadRow) {
        let mut skipped = self.skipped.lock().expect("bad-row report");
        skipped.count += 1;
        let key = |r: &BadRow| (r.file.clone(), r.line);
        if skipped.first.len() < Self::KEEP {
            skipped.first.push(row);
        } else if let Some(last) = skipped.first.iter_mut().max_by_key(|r| key(r))
            && key(&row) < key(last)
        {
            *last = row;
        }
    }

    /// The rows skipped since the last call, in file and line order, leaving the report empty
    /// (a job takes them after each statement).
    pub fn take(&self) -> Skipped {
        let mut taken = std::mem::take(&mut *self.skipped.lock().expect("bad-row report"));
        taken
            .first
            .sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
        taken
    }
}

/// Applies `policy` to a bad row: an error to fail with, or `None` once it is recorded in
/// `skipped`.
pub fn handle(policy: BadRowPolicy, row: BadRow, skipped: &BadRows) -> Option<BadRow> {
    match policy {
        BadRowPolicy::Fail => Some(row),
        BadRowPolicy::Skip => {
            tracing::debug!(%row, "skipping a bad row");
            skipped.push(row);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_keeps_the_first_rows_of_the_file_whatever_their_arrival() {
        let rows = BadRows::default();
        for line in (1..=30).rev() {
            let file = "f.csv".to_string();
            let reason = "bad".to_string();
            rows.push(BadRow { file, line, reason });
        }
        let report = rows.take();
        assert_eq!(report.count, 30);
        let lines: Vec<u64> = report.first.iter().map(|r| r.line).collect();
        assert_eq!(lines, (1..=BadRows::KEEP as u64).collect::<Vec<_>>());
    }
}
