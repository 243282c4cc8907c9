//! A generator of points around hidden centres, for k-means's figures: `clusters` centres drawn
//! uniformly in [-10, 10]^dim, each point one of them (uniformly) plus normal noise of standard
//! deviation `spread` per coordinate. The points go to a CSV file (`id, x0, .., x{dim-1}`, for
//! SQL) and to a raw file of little-endian `f64`s, point after point (for NumPy's `fromfile`),
//! from the same draws. Same seed, same files.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct BlobsSpec {
    /// Points.
    pub rows: u64,
    /// Coordinates per point.
    pub dim: usize,
    /// Hidden centres.
    pub clusters: usize,
    /// Standard deviation of the noise per coordinate.
    pub spread: f64,
}

/// Writes `spec`'s points from `seed` to `csv` and `raw`.
pub fn generate(csv: &Path, raw: &Path, spec: &BlobsSpec, seed: u64) -> std::io::Result<()> {
    let mut random = StdRng::seed_from_u64(seed);
    let centres: Vec<Vec<f64>> = (0..spec.clusters)
        .map(|_| {
            (0..spec.dim)
                .map(|_| random.random_range(-10.0..10.0))
                .collect()
        })
        .collect();
    let noise = Normal::new(0.0, spec.spread).map_err(std::io::Error::other)?;
    let (mut csv, mut raw) = (
        BufWriter::new(File::create(csv)?),
        BufWriter::new(File::create(raw)?),
    );
    let header: Vec<String> = (0..spec.dim).map(|d| format!("x{d}")).collect();
    writeln!(csv, "id,{}", header.join(","))?;
    let mut line = String::new();
    for id in 0..spec.rows {
        let centre = &centres[random.random_range(0..spec.clusters)];
        line.clear();
        line.push_str(&id.to_string());
        for &c in centre {
            let x = c + noise.sample(&mut random);
            line.push(',');
            line.push_str(&format!("{x:.6}"));
            // The raw file holds what the CSV says, to the printed digits.
            let printed: f64 = format!("{x:.6}").parse().expect("a printed number");
            raw.write_all(&printed.to_le_bytes())?;
        }
        writeln!(csv, "{line}")?;
    }
    csv.flush()?;
    raw.flush()
}
