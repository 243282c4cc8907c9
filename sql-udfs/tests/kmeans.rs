//! k-means on the PS against Lloyd's algorithm written here: from the same first centres the
//! same centres, each row's nearest centre and distance as the centres give them, training
//! ended at its tolerance, mini-batch k-means within 1% of Lloyd's inertia, and from k-means++
//! every generated cluster found.

mod common;

use std::sync::Arc;

use angel_client::PsClient;
use angel_ps_service::Standalone;
use angel_sql::job::Job;
use common::column;
use datafusion::arrow::array::{Float64Builder, Int64Array, ListBuilder, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};

const DIM: usize = 8;
const K: usize = 5;

/// A deterministic stream of numbers in [0, 1) (SplitMix64).
struct Stream(u64);

impl Stream {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A roughly normal draw (the sum of 12 uniforms, centred).
    fn normal(&mut self) -> f64 {
        (0..12).map(|_| self.next()).sum::<f64>() - 6.0
    }
}

/// `n` points around `K` true centres 20 apart (unit spread), cluster `i % K` for point `i`;
/// returns the points and the true centres.
fn blobs(n: usize) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let mut stream = Stream(42);
    let truth: Vec<Vec<f64>> = (0..K)
        .map(|c| {
            (0..DIM)
                .map(|d| if d % K == c { 20.0 } else { 0.0 })
                .collect()
        })
        .collect();
    let points = (0..n)
        .map(|i| truth[i % K].iter().map(|&t| t + stream.normal()).collect())
        .collect();
    (points, truth)
}

/// `points` as a table of `id, point`.
fn table(points: &[Vec<f64>]) -> RecordBatch {
    let mut list = ListBuilder::new(Float64Builder::new());
    for p in points {
        list.values().append_slice(p);
        list.append(true);
    }
    let item = Arc::new(Field::new_list_field(DataType::Float64, true));
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("point", DataType::List(item), true),
    ]);
    let ids = Int64Array::from_iter_values(0..points.len() as i64);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![Arc::new(ids), Arc::new(list.finish())],
    )
    .unwrap()
}

fn distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Lloyd's algorithm from `centres` until no assignment changes; returns the centres and the
/// inertia of the last assignment.
fn lloyd(points: &[Vec<f64>], mut centres: Vec<Vec<f64>>) -> (Vec<Vec<f64>>, f64) {
    let mut assigned = vec![usize::MAX; points.len()];
    loop {
        let mut changed = false;
        let mut inertia = 0.0;
        for (p, a) in points.iter().zip(assigned.iter_mut()) {
            let (c, d) = (centres.iter().map(|c| distance(p, c)).enumerate()).fold(
                (0, f64::INFINITY),
                |b, (c, d)| if d < b.1 { (c, d) } else { b },
            );
            changed |= *a != c;
            *a = c;
            inertia += d;
        }
        if !changed {
            return (centres, inertia);
        }
        for (c, centre) in centres.iter_mut().enumerate() {
            let mine: Vec<&Vec<f64>> = (points.iter().zip(&assigned))
                .filter(|(_, a)| **a == c)
                .map(|(p, _)| p)
                .collect();
            if !mine.is_empty() {
                for (d, v) in centre.iter_mut().enumerate() {
                    *v = mine.iter().map(|p| p[d]).sum::<f64>() / mine.len() as f64;
                }
            }
        }
    }
}

/// A job with `points` as table `blobs` and the given first centres as table `seeds`.
async fn job(points: &[Vec<f64>], seeds: &[Vec<f64>]) -> (Standalone, Job) {
    let (service, job) = common::empty_job().await;
    (job.context().register_batch("blobs", table(points))).unwrap();
    (job.context().register_batch("seeds", table(seeds))).unwrap();
    (service, job)
}

/// The centres of model `name`, as the servers hold them.
async fn centres(service: &Standalone, name: &str) -> Vec<Vec<f64>> {
    let client = PsClient::connect(&service.master_addr()).await.unwrap();
    let rows: Vec<u64> = (0..K as u64).collect();
    let pulled = client.pull_rows::<f32>(name, &rows).await.unwrap();
    (pulled.iter())
        .map(|r| r[..DIM].iter().map(|&v| f64::from(v)).collect())
        .collect()
}

/// From the same first centres (two of them in one true cluster, so Lloyd's algorithm has
/// work to do) the model ends at the centres Lloyd's algorithm written here reaches, within
/// single-precision rounding (1e-4), with the same inertia (1e-6 relative), when its
/// tolerance is 0. With the default tolerance it ends at the first iteration that moves the
/// centres by less than it says, earlier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lloyd_on_the_servers_reaches_the_centres_of_lloyd_written_here() {
    let (points, _) = blobs(5000);
    let seeds: Vec<Vec<f64>> = [0, 5, 1, 2, 3].iter().map(|&i| points[i].clone()).collect();
    let (want, inertia) = lloyd(&points, seeds.clone());
    let (service, job) = job(&points, &seeds).await;
    let sql = format!(
        "CREATE MODEL km OPTIONS (kind = 'kmeans', k = {K}, dim = {DIM}, init = 'table:seeds', \
         tolerance = 0) AS SELECT id, point FROM blobs"
    );
    let epochs = job.execute(&sql).await.unwrap().remove(0);
    let got = centres(&service, "km").await;
    for (c, (g, w)) in got.iter().zip(&want).enumerate() {
        for (d, (g, w)) in g.iter().zip(w).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4,
                "centre {c}, coordinate {d}: {g} vs {w}"
            );
        }
    }
    // Each row's nearest centre and distance, dense and sparse, against the centres pulled.
    let sql = "SELECT ps_predict('km', point) AS cluster, ps_distance('km', point) AS distance, \
               ps_distance('km', range(0, 8), point) AS sparse FROM blobs ORDER BY id";
    let scored = job.execute(sql).await.unwrap();
    let (mut clusters, mut distances, mut sparse) = (Vec::new(), Vec::new(), Vec::new());
    for batch in &scored {
        clusters.extend(column(batch, "cluster"));
        distances.extend(column(batch, "distance"));
        sparse.extend(column(batch, "sparse"));
    }
    for (i, p) in points.iter().enumerate() {
        let (c, d) = (got.iter().map(|g| distance(p, g)).enumerate()).fold(
            (0, f64::INFINITY),
            |b, (c, d)| if d < b.1 { (c, d) } else { b },
        );
        assert_eq!(clusters[i], c as f64, "row {i}");
        assert!(
            (distances[i] - d.sqrt()).abs() <= 1e-6,
            "row {i}: {} vs {}",
            distances[i],
            d.sqrt()
        );
        assert_eq!(sparse[i], distances[i], "row {i}");
    }
    let reached = *column(&epochs, "inertia").last().unwrap();
    assert!(
        (reached - inertia).abs() <= 1e-6 * inertia,
        "{reached} vs {inertia}"
    );
    let shift = *column(&epochs, "shift").last().unwrap();
    assert!(shift <= 1e-4, "the centres still moved by {shift}");

    let sql = format!(
        "CREATE MODEL tolerant OPTIONS (kind = 'kmeans', k = {K}, dim = {DIM}, \
         init = 'table:seeds') AS SELECT id, point FROM blobs"
    );
    let tolerant = job.execute(&sql).await.unwrap().remove(0);
    // scikit-learn's scale: the data's variance per coordinate, averaged (every row sampled).
    let n = points.len() as f64;
    let variance = (0..DIM)
        .map(|d| {
            let mean = points.iter().map(|p| p[d]).sum::<f64>() / n;
            points.iter().map(|p| (p[d] - mean).powi(2)).sum::<f64>() / n
        })
        .sum::<f64>()
        / DIM as f64;
    let shifts = column(&tolerant, "shift");
    let ended: Vec<bool> = (shifts.iter())
        .map(|s| s * s <= 1e-4 * variance * (1.0 + 1e-9))
        .collect();
    assert_eq!(
        ended.iter().position(|&e| e),
        Some(ended.len() - 1),
        "{shifts:?}"
    );
    assert!(
        tolerant.num_rows() < epochs.num_rows(),
        "{} iterations with the tolerance, {} without",
        tolerant.num_rows(),
        epochs.num_rows()
    );
}

/// Mini-batch k-means (100 rows a step, 2 workers at once) from one row of each true cluster
/// ends with an inertia within 1% of the optimum Lloyd's algorithm written here reaches from
/// the same rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minibatch_k_means_ends_within_one_percent_of_lloyd() {
    let (points, _) = blobs(5000);
    let seeds = points[..K].to_vec();
    let (_, inertia) = lloyd(&points, seeds.clone());
    let (service, job) = job(&points, &seeds).await;
    let sql = format!(
        "CREATE MODEL km OPTIONS (kind = 'kmeans', k = {K}, dim = {DIM}, init = 'table:seeds', \
         algorithm = 'minibatch', batch_size = 100, workers = 2) AS SELECT id, point FROM blobs"
    );
    let epochs = job.execute(&sql).await.unwrap().remove(0);
    let got = centres(&service, "km").await;
    let reached: f64 = (points.iter())
        .map(|p| {
            got.iter()
                .map(|g| distance(p, g))
                .fold(f64::INFINITY, f64::min)
        })
        .sum();
    assert!(
        reached <= 1.01 * inertia,
        "{reached} against Lloyd's {inertia} after {} passes",
        epochs.num_rows()
    );
    assert_eq!(
        *column(&epochs, "rows").last().unwrap(),
        points.len() as f64
    );
}

/// From k-means++ (the default init) and from k-means|| every true cluster has a centre
/// within 0.5 of its true centre (each estimated from 1,000 points of unit spread), and
/// k-means|| leaves no model of its candidates behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k_means_plus_plus_and_parallel_find_every_cluster() {
    let (points, truth) = blobs(5000);
    let (service, job) = job(&points, &points[..K]).await;
    for (name, init) in [("plus", "k-means++"), ("parallel", "k-means||")] {
        let sql = format!(
            "CREATE MODEL {name} OPTIONS (kind = 'kmeans', k = {K}, dim = {DIM}, \
             init = '{init}') AS SELECT id, point FROM blobs"
        );
        job.execute(&sql).await.unwrap();
        let got = centres(&service, name).await;
        for (t, centre) in truth.iter().enumerate() {
            let nearest = got
                .iter()
                .map(|g| distance(g, centre))
                .fold(f64::INFINITY, f64::min);
            assert!(
                nearest.sqrt() <= 0.5,
                "{init}: true cluster {t}: nearest centre {}",
                nearest.sqrt()
            );
        }
    }
    let client = PsClient::connect(&service.master_addr()).await.unwrap();
    let left = client.matrix("parallel__candidates").await;
    assert!(left.is_err(), "the candidates' model is still there");
}

/// The hash-made numbers the k-means drivers draw rows by (`sampling::uniform`) lie in [0, 1)
/// of 20,000 ids with the mean and spread of uniform ones (within 4 standard errors), and
/// another round draws other numbers.
#[tokio::test]
async fn hashed_numbers_are_uniform() {
    use angel_training::kinds::kmeans::sampling::uniform;
    let ctx = datafusion::prelude::SessionContext::new();
    let (u, v) = (uniform(7, 1, "value"), uniform(7, 2, "value"));
    let sql = format!(
        "SELECT min({u}), max({u}), avg({u}), var_pop({u}), corr({u}, {v}) FROM range(20000)"
    );
    let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
    let figures: Vec<f64> = (0..5)
        .map(|c| angel_training::driver::answers::number(batches[0].column(c), 0).unwrap())
        .collect();
    let error = (1.0f64 / 12.0 / 20_000.0).sqrt();
    assert!(figures[0] >= 0.0 && figures[1] < 1.0, "{figures:?}");
    assert!((figures[2] - 0.5).abs() < 4.0 * error, "{figures:?}");
    assert!((figures[3] - 1.0 / 12.0).abs() < 0.003, "{figures:?}");
    assert!(figures[4].abs() < 4.0 / 20_000f64.sqrt(), "{figures:?}");
}
