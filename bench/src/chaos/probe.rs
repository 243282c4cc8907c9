//! The data every scenario writes and checks: a sparse matrix and a counter with known
//! increments, so a read tells exactly how many values were lost or applied twice.

use std::ops::Add;

use angel_client::{MatrixSpec, PsClient};

use super::lab::Result;

/// Every `KEY_STEP`-th of the matrix's columns is written: spread over every partition.
const KEY_STEP: usize = 7;

/// The matrix's columns.
const COLUMNS: u64 = 1000;

/// Values found off their expected figure, in a matrix or a counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Values below what was acknowledged: changes lost.
    pub lost: u64,
    /// Values above what was acknowledged: changes applied twice.
    pub doubled: u64,
}

impl Add for Tally {
    type Output = Tally;

    fn add(self, other: Tally) -> Tally {
        Tally {
            lost: self.lost + other.lost,
            doubled: self.doubled + other.doubled,
        }
    }
}

impl Tally {
    /// The tally of `found` values against `expected`.
    pub(super) fn of<T: PartialOrd + Copy>(found: &[T], expected: T) -> Tally {
        let below = found.iter().filter(|v| **v < expected).count();
        let above = found.iter().filter(|v| **v > expected).count();
        Tally {
            lost: below as u64,
            doubled: above as u64,
        }
    }
}

/// Matrix `name` (1 x 1,000) and counter `name_seen`, with what every key must hold: the sum of
/// the acknowledged pushes, and the number of acknowledged increases.
#[derive(Debug, Clone)]
pub struct Probe {
    name: String,
    value: f32,
    count: i64,
}

impl Probe {
    /// Creates the matrix and the counter, both empty.
    pub async fn create(c: &PsClient, name: &str) -> Result<Probe> {
        c.create_matrix(MatrixSpec::sparse(name, 1, COLUMNS))
            .await?;
        let probe = Probe {
            name: name.to_string(),
            value: 0.0,
            count: 0,
        };
        c.create_counter(&probe.counter()).await?;
        Ok(probe)
    }

    /// [`Probe::create`], then one [`Probe::add`] of 1.0.
    pub async fn filled(c: &PsClient, name: &str) -> Result<Probe> {
        let mut probe = Probe::create(c, name).await?;
        probe.add(c, 1.0).await?;
        Ok(probe)
    }

    /// Adds `value` at every key of row 0, and 1 to every key of the counter; expected once
    /// both were acknowledged.
    pub async fn add(&mut self, c: &PsClient, value: f32) -> Result<()> {
        let keys = keys();
        c.push_keys(&self.name, 0, &keys, &vec![value; keys.len()])
            .await?;
        self.value += value;
        let words = words();
        c.counter_increase(&self.counter(), &words, &vec![1; words.len()])
            .await?;
        self.count += 1;
        Ok(())
    }

    /// Records a [`Probe::add`] of `value` another writer made (a Python process, say), sending
    /// [`Probe::changes`].
    pub fn added_elsewhere(&mut self, value: f32) {
        self.value += value;
        self.count += 1;
    }

    /// What a [`Probe::add`] sends: the matrix's name and keys (row 0), the counter's name and
    /// words (each increased by 1).
    pub fn changes(&self) -> (&str, Vec<u64>, String, Vec<String>) {
        (&self.name, keys(), self.counter(), words())
    }

    /// Row 0 of the matrix against what it must hold.
    pub async fn tally(&self, c: &PsClient) -> Result<Tally> {
        let values = c.pull_keys::<f32>(&self.name, 0, &keys()).await?;
        Ok(Tally::of(&values, self.value))
    }

    /// The matrix and the counter against what they must hold: the counter is sealed first
    /// (counts are read only from a sealed counter), so nothing may increase it after.
    pub async fn seal_and_tally(&self, c: &PsClient) -> Result<Tally> {
        let matrix = self.tally(c).await?;
        c.counter_seal(&self.counter(), 1).await?;
        let counts: Vec<i64> = c
            .counter_get(&self.counter(), &words())
            .await?
            .into_iter()
            .map(|(count, _)| count)
            .collect();
        Ok(matrix + Tally::of(&counts, self.count))
    }

    fn counter(&self) -> String {
        format!("{}_seen", self.name)
    }
}

/// The keys written: 143 of the 1,000 columns.
fn keys() -> Vec<u64> {
    (0..COLUMNS).step_by(KEY_STEP).collect()
}

/// The counter's keys, one per written column.
fn words() -> Vec<String> {
    keys().iter().map(|k| format!("k{k}")).collect()
}
