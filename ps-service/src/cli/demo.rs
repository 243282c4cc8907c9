//! `angel-ps demo`: starts an embedded service and runs a short PS job: sparse pushes and
//! pruned pulls over a 10^9-column model, server-side PS functions on a dense vector, and a
//! check of every result against the same computation done locally.

use std::collections::HashMap;
use std::time::Instant;

use angel_client::{MatrixSpec, PsClient, PsError, Result};
use clap::Args;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::bench::progress;
use crate::standalone::{Standalone, StandaloneConfig};

/// Flags of `angel-ps demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Servers in the embedded service.
    #[arg(long, default_value_t = 2)]
    pub servers: usize,
    /// Push/pull rounds.
    #[arg(long, default_value_t = 50)]
    pub rounds: usize,
    /// Keys per round (drawn from 10^9 columns).
    #[arg(long, default_value_t = 100_000)]
    pub keys: usize,
    /// Random seed.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
}

/// Runs the demo job and prints a summary.
pub async fn run(args: DemoArgs) -> Result<()> {
    let service = Standalone::start(StandaloneConfig::new(args.servers)).await?;
    let client = PsClient::connect(&service.master_addr()).await?;
    println!(
        "embedded service: master {} with {} servers",
        service.master_addr(),
        args.servers
    );
    let result = job(&client, &args).await;
    service.shutdown().await?;
    result
}

async fn job(client: &PsClient, args: &DemoArgs) -> Result<()> {
    let model = client
        .create_matrix(MatrixSpec::sparse("demo_weights", 1, 1_000_000_000))
        .await?;
    println!(
        "created '{}' (1 x 10^9, sparse f32, {} partitions)",
        model.name(),
        model.meta.partitions.len()
    );
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut expected: HashMap<u64, f64> = HashMap::new();
    let bar = progress(args.rounds as u64, "push + pull");
    let (mut push_secs, mut pull_secs) = (0.0, 0.0);
    for _ in 0..args.rounds {
        let keys: Vec<u64> = (0..args.keys)
            .map(|_| rng.random_range(0..1_000_000_000))
            .collect();
        let grads: Vec<f32> = keys.iter().map(|_| rng.random_range(-1.0..1.0)).collect();
        let t = Instant::now();
        client.push_keys("demo_weights", 0, &keys, &grads).await?;
        push_secs += t.elapsed().as_secs_f64();
        for (k, g) in keys.iter().zip(&grads) {
            *expected.entry(*k).or_default() += f64::from(*g);
        }
        let t = Instant::now();
        let pulled: Vec<f32> = client.pull_keys("demo_weights", 0, &keys[..1000]).await?;
        pull_secs += t.elapsed().as_secs_f64();
        for (k, v) in keys.iter().zip(&pulled) {
            check(f64::from(*v), expected[k], &format!("weight of key {k}"))?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let sum = client.psf("sum", &[("demo_weights", 0)], &[]).await?[0];
    check(sum, expected.values().sum(), "server-side sum")?;
    let nnz = client.psf("nnz", &[("demo_weights", 0)], &[]).await?[0];
    check(nnz, expected.len() as f64, "server-side nnz")?;

    client
        .create_matrix(MatrixSpec::dense("demo_dense", 2, 1_000_000))
        .await?;
    client
        .psf(
            "random_uniform",
            &[("demo_dense", 0)],
            &[-1.0, 1.0, args.seed as f64],
        )
        .await?;
    client
        .psf("copy", &[("demo_dense", 0), ("demo_dense", 1)], &[])
        .await?;
    client
        .psf("axpy", &[("demo_dense", 0), ("demo_dense", 1)], &[2.0])
        .await?;
    let rows: Vec<Vec<f32>> = client.pull_rows("demo_dense", &[0, 1]).await?;
    let norm = client.psf("norm2", &[("demo_dense", 1)], &[]).await?[0];
    let local: f64 = rows[0]
        .iter()
        .map(|&x| (3.0 * f64::from(x)).powi(2))
        .sum::<f64>()
        .sqrt();
    check(norm, local, "norm2 of 3x after copy + axpy")?;
    let pairs = (args.rounds * args.keys) as f64;
    println!(
        "pushed {} pairs at {:.2} M pairs/s; pruned pulls at {:.2} M keys/s",
        pairs,
        pairs / push_secs / 1e6,
        (args.rounds * 1000) as f64 / pull_secs / 1e6
    );
    println!(
        "live keys on the servers: {nnz}; sum, nnz, norm2, copy, axpy and random init match local results"
    );
    client.drop_matrix("demo_weights").await?;
    client.drop_matrix("demo_dense").await?;
    println!("demo ok");
    Ok(())
}

fn check(got: f64, want: f64, what: &str) -> Result<()> {
    let tolerance = 1e-3 * want.abs().max(1.0);
    if (got - want).abs() <= tolerance {
        return Ok(());
    }
    Err(PsError::Internal(format!(
        "{what}: the service says {got}, local computation {want}"
    )))
}
