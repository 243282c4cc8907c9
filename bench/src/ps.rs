//! `angel-ps bench ps`: PS throughput against a standalone service with 1 and 2 servers,
//! beside the same bytes sent through a plain tokio TCP socket on loopback.

use std::future::Future;
use std::path::PathBuf;
use std::time::Instant;

use angel_client::{MatrixSpec, PsClient, PsError, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use angel_ps_service::standalone::{Standalone, StandaloneConfig};
use angel_runner::output::Output;

/// Flags of `angel-ps bench ps`.
#[derive(Debug, Args)]
pub struct PsBenchArgs {
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
    /// Server counts to measure, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub servers: Vec<usize>,
    /// Keys per sparse pull or push.
    #[arg(long, default_value_t = 100_000)]
    pub keys: usize,
    /// Sparse keys are drawn uniformly from 0..key_space.
    #[arg(long, default_value_t = 1_000_000_000)]
    pub key_space: u64,
    /// f32 elements of the dense row.
    #[arg(long, default_value_t = 10_000_000)]
    pub dense: u64,
    /// Timed repetitions of each sparse operation.
    #[arg(long, default_value_t = 40)]
    pub rounds: usize,
    /// Timed repetitions of each dense operation.
    #[arg(long, default_value_t = 10)]
    pub dense_rounds: usize,
    /// Distinct keys pushed into a sparse f32 matrix to measure server memory per key.
    #[arg(long, default_value_t = 10_000_000)]
    pub memory_keys: u64,
    /// Distinct string keys counted into a distributed counter to measure its server memory.
    #[arg(long, default_value_t = 10_000_000)]
    pub counter_keys: u64,
    /// Also write the table, as Markdown, to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One measured operation.
#[derive(Debug, Clone)]
pub struct Measure {
    /// Servers in the service.
    pub servers: usize,
    /// Operation name.
    pub op: &'static str,
    /// (key, value) pairs or elements per operation.
    pub pairs: usize,
    /// Payload bytes per operation (keys and values).
    pub bytes: usize,
    /// Mean seconds per operation.
    pub secs: f64,
    /// Mean seconds to move `bytes` through a raw TCP socket.
    pub raw_secs: f64,
}

impl Measure {
    /// Pairs (or elements) per second.
    pub fn pairs_per_sec(&self) -> f64 {
        self.pairs as f64 / self.secs
    }
    /// Payload megabytes per second.
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.secs / 1e6
    }
}

/// Runs `bench ps` and prints (and optionally writes) the table.
pub async fn ps(args: PsBenchArgs) -> Result<()> {
    let mut rows = Vec::new();
    let mut memory = String::new();
    for &servers in &args.servers {
        let service = Standalone::start(StandaloneConfig::new(servers)).await?;
        let client = PsClient::connect(&service.master_addr()).await?;
        rows.extend(measure_ps(&client, servers, &args).await?);
        if memory.is_empty() && args.memory_keys > 0 {
            memory = measure_memory(&client, args.memory_keys).await?;
        }
        if servers == args.servers[0] {
            memory = format!("{memory}\n{}", measure_colliding(&client).await?);
        }
        if servers == args.servers[0] && args.counter_keys > 0 {
            memory = format!(
                "{memory}\n{}",
                measure_counter_memory(&client, args.counter_keys).await?
            );
        }
        service.shutdown().await?;
    }
    let table = table(&rows);
    super::show(args.output, &[("throughput", &table)], &[&memory]);
    if let Some(path) = &args.out {
        super::write(path, &format!("{}\n{memory}\n", table.markdown()))
            .map_err(|e| PsError::Internal(e.to_string()))?;
    }
    Ok(())
}

/// Pushes `keys` distinct keys into a sparse f32 matrix and reports the bytes its partitions
/// hold on the servers, per live key, against the raw 12 bytes (u64 key + f32 value).
async fn measure_memory(client: &PsClient, keys: u64) -> Result<String> {
    let name = "bench_memory";
    let m = client
        .create_matrix(MatrixSpec::sparse(name, 1, 1 << 62))
        .await?;
    let bar = progress(keys.div_ceil(100_000), "memory: pushing distinct keys");
    let mut rng = StdRng::seed_from_u64(7);
    let stride = (1u64 << 62) / keys;
    for chunk in (0..keys).collect::<Vec<_>>().chunks(100_000) {
        let batch: Vec<u64> = chunk
            .iter()
            .map(|i| i * stride + rng.random_range(0..stride))
            .collect();
        client
            .push_keys(name, 0, &batch, &vec![1.0f32; batch.len()])
            .await?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let (live, bytes) = held(client, m.meta.id).await?;
    client.drop_matrix(name).await?;
    let per_key = bytes as f64 / live.max(1) as f64;
    Ok(format!(
        "sparse f32 memory: {live} live keys hold {:.1} MB on the servers = {per_key:.1} bytes/key \
         ({:.2}x the raw 12 bytes)",
        bytes as f64 / 1e6,
        per_key / 12.0
    ))
}

/// Times one push of 160,000 keys chosen to share a home slot under a fixed Fibonacci hash
/// (`j * inverse(0x9E37..15)`), against one push of as many random keys: with the servers'
/// keyed hashing the two cost the same.
async fn measure_colliding(client: &PsClient) -> Result<String> {
    let a = 0x9E37_79B9_7F4A_7C15u64;
    let inverse = (0..6).fold(a, |x, _| {
        x.wrapping_mul(2u64.wrapping_sub(a.wrapping_mul(x)))
    });
    let colliding: Vec<u64> = (1..)
        .map(|j: u64| j.wrapping_mul(inverse))
        .filter(|&k| k < 1 << 62)
        .take(160_000)
        .collect();
    let mut rng = StdRng::seed_from_u64(11);
    let random: Vec<u64> = (0..colliding.len())
        .map(|_| rng.random_range(0..1 << 62))
        .collect();
    let mut secs = Vec::new();
    for (name, keys) in [("bench_colliding", &colliding), ("bench_random", &random)] {
        client
            .create_matrix(MatrixSpec::sparse(name, 1, 1 << 62))
            .await?;
        let started = Instant::now();
        client
            .push_keys(name, 0, keys, &vec![1.0f32; keys.len()])
            .await?;
        secs.push(started.elapsed().as_secs_f64());
        client.drop_matrix(name).await?;
    }
    Ok(format!(
        "colliding keys: one push of {} keys chosen to collide under a fixed hash took {:.3} s; \
         as many random keys {:.3} s",
        colliding.len(),
        secs[0],
        secs[1]
    ))
}

/// (stored elements, bytes) the servers hold for matrix or counter `id`.
async fn held(client: &PsClient, id: u32) -> Result<(u64, u64)> {
    Ok(client
        .status()
        .await?
        .servers
        .iter()
        .flat_map(|s| &s.partitions)
        .filter(|p| p.matrix_id == id)
        .fold((0, 0), |(n, b), p| (n + p.elements, b + p.bytes)))
}

/// Counts `keys` distinct feature strings (`feature_<n>`, 9 to 16 bytes) into a counter and
/// reports the bytes its partitions hold on the servers, and the growth of this process's
/// resident memory (the service runs in it) as a cross-check.
async fn measure_counter_memory(client: &PsClient, keys: u64) -> Result<String> {
    let name = "bench_counter_memory";
    let counter = client.create_counter(name).await?;
    let rss_before = super::memory_mb("VmRSS");
    let bar = progress(keys.div_ceil(100_000), "memory: counting distinct strings");
    for start in (0..keys).step_by(100_000) {
        let batch: Vec<String> = (start..(start + 100_000).min(keys))
            .map(|i| format!("feature_{i}"))
            .collect();
        client
            .counter_increase(name, &batch, &vec![1; batch.len()])
            .await?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let (live, bytes) = held(client, counter.space.meta.id).await?;
    let rss_growth = super::memory_mb("VmRSS")
        .zip(rss_before)
        .map(|(after, before)| after - before);
    client.counter_seal(name, 1).await?;
    client.counter_clean(name).await?;
    Ok(format!(
        "counter memory: {live} distinct keys hold {:.0} MB on the servers ({:.1} bytes/key); \
         process RSS grew by {}",
        bytes as f64 / 1e6,
        bytes as f64 / live.max(1) as f64,
        rss_growth.map_or("n/a".into(), |mb| format!("{mb:.0} MB"))
    ))
}

/// Measures sparse push/pull and dense push/pull on one service.
pub async fn measure_ps(
    client: &PsClient,
    servers: usize,
    args: &PsBenchArgs,
) -> Result<Vec<Measure>> {
    let sparse = format!("bench_sparse_{servers}");
    let dense = format!("bench_dense_{servers}");
    client
        .create_matrix(MatrixSpec::sparse(&sparse, 1, args.key_space))
        .await?;
    client
        .create_matrix(MatrixSpec::dense(&dense, 1, args.dense))
        .await?;
    let mut rng = StdRng::seed_from_u64(42);
    let keys: Vec<u64> = (0..args.keys)
        .map(|_| rng.random_range(0..args.key_space))
        .collect();
    let values: Vec<f32> = (0..args.keys).map(|_| rng.random::<f32>()).collect();
    let row: Vec<f32> = (0..args.dense).map(|i| i as f32).collect();
    let total = 2 * (args.rounds + args.dense_rounds) as u64;
    let bar = progress(total, &format!("bench ps, {servers} server(s)"));
    let sparse_bytes = args.keys * 12;
    let dense_bytes = args.dense as usize * 4;
    let sparse_raw = raw_tcp_secs(sparse_bytes, args.rounds).await?;
    let dense_raw = raw_tcp_secs(dense_bytes, args.dense_rounds).await?;
    let mut out = Vec::new();
    let mut add = |op, pairs, bytes, secs, raw_secs| {
        out.push(Measure {
            servers,
            op,
            pairs,
            bytes,
            secs,
            raw_secs,
        })
    };
    let secs = time(args.rounds, &bar, || {
        client.push_keys(&sparse, 0, &keys, &values)
    })
    .await?;
    add("sparse push", args.keys, sparse_bytes, secs, sparse_raw);
    let secs = time(args.rounds, &bar, || async {
        client.pull_keys::<f32>(&sparse, 0, &keys).await.map(drop)
    })
    .await?;
    add("sparse pull", args.keys, sparse_bytes, secs, sparse_raw);
    let secs = time(args.dense_rounds, &bar, || client.push_row(&dense, 0, &row)).await?;
    add(
        "dense push",
        args.dense as usize,
        dense_bytes,
        secs,
        dense_raw,
    );
    let secs = time(args.dense_rounds, &bar, || async {
        client.pull_rows::<f32>(&dense, &[0]).await.map(drop)
    })
    .await?;
    add(
        "dense pull",
        args.dense as usize,
        dense_bytes,
        secs,
        dense_raw,
    );
    bar.finish_and_clear();
    client.drop_matrix(&sparse).await?;
    client.drop_matrix(&dense).await?;
    Ok(out)
}

/// A progress bar with rate and ETA, drawn on stderr.
pub fn progress(len: u64, message: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ops, {per_sec}, ETA {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(message.to_string());
    bar
}

/// Mean seconds per call of `op` over `rounds` timed calls, after one warm-up call.
pub async fn time<F, Fut>(rounds: usize, bar: &ProgressBar, mut op: F) -> Result<f64>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<()>>,
{
    op().await?;
    let start = Instant::now();
    for _ in 0..rounds.max(1) {
        op().await?;
        bar.inc(1);
    }
    Ok(start.elapsed().as_secs_f64() / rounds.max(1) as f64)
}

/// Mean seconds to send `bytes` over a loopback tokio TCP socket and get a one-byte reply:
/// the bound any RPC moving the same payload can approach.
pub async fn raw_tcp_secs(bytes: usize, rounds: usize) -> Result<f64> {
    let io = |e: std::io::Error| PsError::Internal(format!("raw TCP baseline: {e}"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;
    let echo = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await?;
        socket.set_nodelay(true)?;
        let mut buf = vec![0u8; bytes];
        while socket.read_exact(&mut buf).await.is_ok() {
            socket.write_all(&[1]).await?;
        }
        std::io::Result::Ok(())
    });
    let mut socket = tokio::net::TcpStream::connect(addr).await.map_err(io)?;
    socket.set_nodelay(true).map_err(io)?;
    let payload = vec![7u8; bytes];
    let mut ack = [0u8; 1];
    let mut secs = 0.0;
    for round in 0..=rounds.max(1) {
        let start = Instant::now();
        socket.write_all(&payload).await.map_err(io)?;
        socket.read_exact(&mut ack).await.map_err(io)?;
        if round > 0 {
            secs += start.elapsed().as_secs_f64();
        }
    }
    drop(socket);
    echo.await
        .map_err(|e| PsError::Internal(format!("raw TCP baseline: {e}")))?
        .map_err(io)?;
    Ok(secs / rounds.max(1) as f64)
}

const HEADER: [&str; 8] = [
    "servers",
    "operation",
    "pairs/op",
    "MB/op",
    "Mpairs/s",
    "MB/s",
    "raw TCP MB/s",
    "ratio",
];

fn cells(m: &Measure) -> [String; 8] {
    let raw_mb = m.bytes as f64 / m.raw_secs / 1e6;
    [
        m.servers.to_string(),
        m.op.to_string(),
        m.pairs.to_string(),
        format!("{:.1}", m.bytes as f64 / 1e6),
        format!("{:.2}", m.pairs_per_sec() / 1e6),
        format!("{:.0}", m.mb_per_sec()),
        format!("{raw_mb:.0}"),
        format!("{:.2}", m.raw_secs / m.secs),
    ]
}

/// The measurements as a table.
pub fn table(rows: &[Measure]) -> super::Table {
    super::Table::new(&HEADER, rows.iter().map(|m| cells(m).to_vec()).collect())
}
