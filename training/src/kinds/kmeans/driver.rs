//! The driver of a k-means statement (`CREATE MODEL ... OPTIONS (kind = 'kmeans', k = ...)`
//! and `TRAIN MODEL` of such a model): Lloyd's algorithm or mini-batch k-means, after
//! [`super::init`] wrote the first centres. In Lloyd's algorithm each iteration is one pass of
//! `ps_train`, whose tasks push per centre the sums and counts of the rows nearest it; the
//! driver then moves each centre to its rows' mean on the servers (`scale`, `sub`, `dot`,
//! `axpy`: only the shift comes back). In mini-batch k-means the tasks move the centres
//! themselves, every `batch_size` rows, and an iteration is a pass over the rows. Training
//! stops after `epochs` iterations or when the centres move by less than `tolerance` says.
//!
//! The epoch table has a row per iteration: rows, inertia (the summed squared distance of the
//! rows to the centres they were assigned to), its mean, how far the centres moved (the root
//! of the summed squared shifts), the centres no row was nearest (kept where they were),
//! seconds and workers.

use std::time::Instant;

use angel_client::PsClient;
use arrow::array::RecordBatch;

use super::init::SAMPLE;
use super::sampling::{read, uniform};
use super::{Algorithm, KMeans};
use crate::driver::epoch_table::{self, Column};
use crate::driver::progress::bar;
use crate::error::Result;
use crate::model::Engine;

/// The rows' variance per coordinate, averaged over the coordinates (the scale of
/// scikit-learn's `tol`), from a uniform sample of about 50,000 of them: each row kept when a
/// number made from a hash of its id is below the share wanted, in one pass without sorting.
async fn variance(engine: &dyn Engine, kmeans: &KMeans) -> Result<f64> {
    let query = engine.query();
    let (id, inputs, sql) = (&query.label, &query.inputs, &query.sql);
    let share = SAMPLE as f64 / query.rows.max(1) as f64;
    let drawn = uniform(kmeans.seed, 0, id);
    let sql = format!("SELECT {id}, {inputs} FROM ({sql}) AS rows WHERE {drawn} < {share:e}");
    let sample = read(engine, &sql).await?;
    let dim = engine.plan().spec.dim as usize;
    let (mut sums, mut squares) = (vec![0.0; dim], 0.0);
    for r in 0..sample.len() {
        for (at, &key) in sample.keys(r).iter().enumerate() {
            let v = sample.value(r, at);
            sums[key as usize] += v;
            squares += v * v;
        }
    }
    let n = sample.len().max(1) as f64;
    let mean_square: f64 = sums.iter().map(|s| (s / n) * (s / n)).sum();
    Ok((squares / n - mean_square).max(0.0) / dim as f64)
}

/// Lloyd's iterations or mini-batch passes on the statement's k-means model, for at most its
/// epochs; returns the epoch table.
pub async fn train(engine: &dyn Engine, kmeans: &KMeans) -> Result<RecordBatch> {
    let plan = engine.plan();
    let centres = OnServers {
        client: engine.client(),
        name: engine.model(),
        k: kmeans.k as u64,
        dim: plan.spec.dim,
    };
    let tolerance = kmeans.tolerance * variance(engine, kmeans).await?;
    let bar = bar(plan.epochs as u64, "iterations");
    let mut table = Vec::new();
    for iteration in 1..=plan.epochs {
        let started = Instant::now();
        let sizes = centres.sizes(0).await?;
        centres.before_pass(kmeans.algorithm).await?;
        let passed = engine.pass(1, None).await?;
        let mean = passed.mean.unwrap_or(f64::NAN);
        let (shift, empty) = match kmeans.algorithm {
            Algorithm::Lloyd => {
                let counts = centres.sizes(centres.k).await?;
                centres.move_to_means(&counts, &sizes).await?
            }
            Algorithm::MiniBatch => centres.moved_in_pass(&sizes).await?,
        };
        let figures = [
            ("mean_squared_distance", passed.mean),
            ("shift", Some(shift)),
        ];
        plan.check_finite((engine.model(), iteration), &figures)?;
        let norms = centres.squared_norms().await?;
        table.push(Row {
            iteration: iteration as i64,
            rows: passed.rows as i64,
            inertia: mean * passed.rows as f64,
            mean_squared_distance: mean,
            shift,
            empty_clusters: empty as i64,
            seconds: started.elapsed().as_secs_f64(),
            workers: plan.workers() as i64,
        });
        bar.inc(1);
        // Below rounding of the single-precision centres the assignments are final.
        if shift * shift <= tolerance.max(1e-12 * (1.0 + norms)) {
            break;
        }
    }
    bar.finish_and_clear();
    epoch_table::batch(&table, &columns())
}

/// A k-means model's rows on the servers: centres `0..k`, sums `k..2k`.
struct OnServers<'a> {
    client: &'a PsClient,
    name: &'a str,
    k: u64,
    dim: u64,
}

impl OnServers<'_> {
    async fn psf(&self, function: &str, rows: &[u64], args: &[f64]) -> Result<f64> {
        let operands: Vec<(&str, u64)> = rows.iter().map(|&r| (self.name, r)).collect();
        let answer = self.client.psf(function, &operands, args).await?;
        Ok(answer.first().copied().unwrap_or_default())
    }

    /// Readies rows `k..2k` for a pass: zero for Lloyd's sums, a copy of the centres for
    /// mini-batch k-means to measure their move by.
    async fn before_pass(&self, algorithm: Algorithm) -> Result<()> {
        for c in 0..self.k {
            match algorithm {
                Algorithm::Lloyd => self.psf("zero", &[self.k + c], &[]).await?,
                Algorithm::MiniBatch => self.psf("copy", &[c, self.k + c], &[]).await?,
            };
        }
        Ok(())
    }

    /// Column `dim` of rows `from..from + k`: the centres' sizes (from 0) or the counts the
    /// workers pushed (from k).
    async fn sizes(&self, from: u64) -> Result<Vec<f64>> {
        let rows: Vec<u64> = (from..from + self.k).collect();
        let key = [self.dim];
        let pulled = self.client.pull_at::<f32>(self.name, &rows, &key, None);
        let (values, _) = pulled.await?;
        Ok(values.into_iter().map(f64::from).collect())
    }

    /// Moves every centre with rows to their mean, its size to `counts`; returns the root of
    /// the summed squared shifts and the centres without rows.
    async fn move_to_means(&self, counts: &[f64], sizes: &[f64]) -> Result<(f64, usize)> {
        let (mut shift, mut empty) = (0.0, 0);
        let dim = self.dim;
        for c in 0..self.k {
            let (n, size) = (counts[c as usize], sizes[c as usize]);
            if n == 0.0 {
                empty += 1;
                continue;
            }
            let (centre, sum) = (c, self.k + c);
            // sum = mean (its count column then 1, made n), then sum = mean - centre.
            self.psf("scale", &[sum], &[1.0 / n]).await?;
            let count = [(n - 1.0) as f32];
            let key = [dim];
            let pushed = self.client.push_keys(self.name, sum, &key, &count);
            pushed.await?;
            self.psf("sub", &[sum, centre, sum], &[]).await?;
            // The count column's change is no move of the centre.
            shift += self.psf("dot", &[sum, sum], &[]).await? - (n - size) * (n - size);
            self.psf("axpy", &[sum, centre], &[1.0]).await?;
        }
        Ok((shift.max(0.0).sqrt(), empty))
    }

    /// The root of the summed squared moves of the centres since [`Self::before_pass`] copied
    /// them (then of sizes `sizes`), and the centres given no row since.
    async fn moved_in_pass(&self, sizes: &[f64]) -> Result<(f64, usize)> {
        let (mut shift, mut empty) = (0.0, 0);
        let now = self.sizes(0).await?;
        for c in 0..self.k {
            let (centre, before) = (c, self.k + c);
            let grown = now[c as usize] - sizes[c as usize];
            if grown == 0.0 {
                empty += 1;
                continue;
            }
            self.psf("sub", &[centre, before, before], &[]).await?;
            shift += self.psf("dot", &[before, before], &[]).await? - grown * grown;
        }
        Ok((shift.max(0.0).sqrt(), empty))
    }

    /// The summed squared norms of the centres (their sizes left out).
    async fn squared_norms(&self) -> Result<f64> {
        let mut total = 0.0;
        for c in 0..self.k {
            total += self.psf("dot", &[c, c], &[]).await?;
        }
        let sizes = self.sizes(0).await?;
        Ok(total - sizes.iter().map(|s| s * s).sum::<f64>())
    }
}

/// One iteration's figures.
struct Row {
    iteration: i64,
    rows: i64,
    inertia: f64,
    mean_squared_distance: f64,
    shift: f64,
    empty_clusters: i64,
    seconds: f64,
    workers: i64,
}

/// The epoch table's columns.
fn columns() -> Vec<Column<Row>> {
    vec![
        Column::Int("iteration", |r| r.iteration),
        Column::Int("rows", |r| r.rows),
        Column::Float("inertia", |r| r.inertia),
        Column::Float("mean_squared_distance", |r| r.mean_squared_distance),
        Column::Float("shift", |r| r.shift),
        Column::Int("empty_clusters", |r| r.empty_clusters),
        Column::Float("seconds", |r| r.seconds),
        Column::Int("workers", |r| r.workers),
    ]
}
