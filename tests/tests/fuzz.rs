//! Fuzz targets for every decoder of untrusted bytes, driven by proptest on stable Rust:
//! server requests (push, pull and PS-function payloads, raw and SketchML-coded slices),
//! SketchML payloads, snapshot files, and libsvm and CSV lines. Each input is a valid seed
//! mutated (bytes flipped, cut, inserted, removed) or plain noise; the decoder must answer Ok
//! or an error, and never panic.
//!
//! Runs `ANGEL_FUZZ_CASES` inputs per target (default 2,000: a bounded run in CI); a longer run:
//! `ANGEL_FUZZ_CASES=100000 cargo test --test fuzz -- --nocapture`. A failure prints
//! the shrunk input.

use std::sync::atomic::{AtomicU64, Ordering};

use angel_etl::bad_rows::BadRows;
use angel_proto::server_server::Server;
use angel_proto::{
    Caller, Compression, CreatePartitionsRequest, MatrixMeta, Partition as Block,
    PartitionSnapshot, PsfBlock, PsfOperand, PsfRequest, PullRequest, PushRequest, RowSlice,
    SnapshotRow, StorageKind, ValueType, codec, sketchml, wire,
};
use angel_ps_service::server::memory::MemoryAccount;
use angel_ps_service::server::service::ServerService;
use angel_ps_service::server::{Functions, Limits};
use angel_ps_service::snapshot::SnapshotDir;
use angel_storage::Location;
use proptest::prelude::*;
use proptest::sample::Index;
use prost::Message;
use tonic::Request;

/// Inputs per target.
fn cases() -> u32 {
    std::env::var("ANGEL_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        // Shrinking re-runs the target; keep a failing run short.
        max_shrink_iters: 2_000,
        // A failure prints its shrunk input; nothing is written into the repository.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// One of `seeds` with up to 3 edits, or (one in five) noise.
fn mutated(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let edit = (any::<Index>(), any::<u8>(), 0..4u8);
    let edited = (
        proptest::sample::select(seeds),
        proptest::collection::vec(edit, 0..4),
    )
        .prop_map(|(mut bytes, edits)| {
            for (at, byte, kind) in edits {
                let i = if bytes.is_empty() {
                    0
                } else {
                    at.index(bytes.len())
                };
                match kind {
                    0 if !bytes.is_empty() => bytes[i] ^= byte | 1,
                    1 => bytes.truncate(i),
                    2 => bytes.insert(i, byte),
                    _ if !bytes.is_empty() => {
                        bytes.remove(i);
                    }
                    _ => {}
                }
            }
            bytes
        });
    prop_oneof![
        4 => edited,
        1 => proptest::collection::vec(any::<u8>(), 0..512),
    ]
}

/// Counts a target's inputs, and those its decoder accepted, and reports them when it ends
/// (`--nocapture` shows it): a target whose inputs are all refused tests little.
struct Runs {
    name: &'static str,
    inputs: AtomicU64,
    accepted: AtomicU64,
}

impl Runs {
    fn new(name: &'static str) -> Self {
        Runs {
            name,
            inputs: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
        }
    }

    /// Fails unless some inputs were accepted: otherwise only the decoder's first check ran.
    fn check(&self) {
        let accepted = self.accepted.load(Ordering::Relaxed);
        assert!(accepted > 0, "fuzz {}: no input was accepted", self.name);
    }

    /// Counts an input, and whether the decoder took it.
    fn one<T, E>(&self, result: Result<T, E>) {
        self.inputs.fetch_add(1, Ordering::Relaxed);
        if result.is_ok() {
            self.accepted.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Runs {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let inputs = self.inputs.load(Ordering::Relaxed);
            let accepted = self.accepted.load(Ordering::Relaxed);
            eprintln!(
                "fuzz {}: {inputs} inputs, {accepted} accepted, no panic",
                self.name
            );
        }
    }
}

fn sparse() -> MatrixMeta {
    let block = |id, cols: std::ops::Range<u64>| Block {
        id,
        row_end: 2,
        col_start: cols.start,
        col_end: cols.end,
        ..Default::default()
    };
    MatrixMeta {
        id: 7,
        name: "sparse".into(),
        rows: 2,
        cols: 1 << 40,
        value_type: ValueType::F32 as i32,
        storage: StorageKind::Sparse as i32,
        partitions: vec![block(0, 0..1 << 39), block(1, 1 << 39..1 << 40)],
        ..Default::default()
    }
}

fn dense() -> MatrixMeta {
    MatrixMeta {
        id: 8,
        name: "dense".into(),
        rows: 1,
        cols: 64,
        value_type: ValueType::F32 as i32,
        storage: StorageKind::Dense as i32,
        partitions: vec![Block {
            id: 0,
            row_end: 1,
            col_end: 64,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A server's service, off the network (the handlers are what the network would call), with
/// the two matrices above and snapshots going to `dir`.
fn server(dir: Option<&std::path::Path>) -> ServerService {
    ServerService {
        limits: Limits {
            max_message_bytes: 1 << 20,
            ..Limits::default()
        },
        memory: MemoryAccount::new(1 << 30),
        snapshot_dir: parking_lot::RwLock::new(
            dir.map(|d| SnapshotDir::parse(&d.display().to_string()).unwrap()),
        ),
        ..ServerService::new(Functions::default(), ADMIN.into(), "server@fuzz".into())
    }
}

/// The credential of the master's calls, which creating partitions needs.
const ADMIN: &str = "fuzz-admin-token";

/// `message` as the master sends it: with the admin credential.
fn from_master<T>(message: T) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert(angel_ps_service::admin::HEADER, ADMIN.parse().unwrap());
    request
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

async fn create(
    service: &ServerService,
    matrix: MatrixMeta,
    ids: Vec<u32>,
    restore: bool,
) -> Result<(), tonic::Status> {
    let request = CreatePartitionsRequest {
        matrix: Some(matrix),
        partition_ids: ids,
        epoch: 1,
        restore,
    };
    service
        .create_partitions(from_master(request))
        .await
        .map(drop)
}

/// Valid push, pull and PS-function requests, encoded: the seeds of [`server_requests`].
fn request_seeds() -> Vec<Vec<u8>> {
    let keys: Vec<u64> = (0..300u64).map(|i| i * 7_919_000_003 % (1 << 40)).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    let values: Vec<f32> = (0..300).map(|i| (i % 13) as f32 * 0.05 - 0.3).collect();
    let caller = Some(Caller {
        worker_id: 1,
        seq: 1,
        ..Default::default()
    });
    let slice = |pid, row, encoded: codec::Encoded| RowSlice {
        partition_id: pid,
        row,
        keys: encoded.keys,
        values: encoded.values,
        codec: encoded.codec,
    };
    let (low, high): (Vec<u64>, Vec<u64>) = sorted.iter().partition(|&&k| k < 1 << 39);
    let sketch: Compression = "sketchml".parse().unwrap();
    let push = |compression: &Compression| PushRequest {
        caller,
        matrix_id: 7,
        value_type: ValueType::F32 as i32,
        slices: vec![
            slice(
                0,
                0,
                codec::encode_slice(compression, &low, &values[..low.len()]),
            ),
            slice(
                1,
                1,
                codec::encode_slice(compression, &high, &values[..high.len()]),
            ),
        ],
        ..Default::default()
    };
    let dense_push = PushRequest {
        caller,
        matrix_id: 8,
        value_type: ValueType::F32 as i32,
        slices: vec![RowSlice {
            values: wire::encode_values(&values[..64]),
            ..Default::default()
        }],
        ..Default::default()
    };
    let pull = PullRequest {
        caller: None,
        matrix_id: 7,
        value_type: ValueType::F32 as i32,
        slices: vec![RowSlice {
            keys: wire::encode_keys(&low),
            ..Default::default()
        }],
    };
    let psf = PsfRequest {
        caller,
        name: "dot".into(),
        operands: vec![
            PsfOperand {
                matrix_id: 8,
                row: 0
            };
            2
        ],
        args: vec![],
        blocks: vec![PsfBlock {
            partition_ids: vec![0, 0],
        }],
    };
    let tagged = |tag: u8, bytes: Vec<u8>| [vec![tag], bytes].concat();
    vec![
        tagged(0, push(&Compression::None).encode_to_vec()),
        tagged(0, push(&sketch).encode_to_vec()),
        tagged(0, dense_push.encode_to_vec()),
        tagged(1, pull.encode_to_vec()),
        tagged(2, psf.encode_to_vec()),
    ]
}

/// Decodes `input` (a tag byte choosing push, pull or PS function, then the request) and
/// calls the server's handler with it.
async fn handle(service: &ServerService, input: &[u8]) -> Result<(), tonic::Status> {
    let invalid = |e: prost::DecodeError| tonic::Status::invalid_argument(e.to_string());
    let Some((&tag, body)) = input.split_first() else {
        return Err(tonic::Status::invalid_argument("empty"));
    };
    match tag % 3 {
        0 => {
            let request = PushRequest::decode(body).map_err(invalid)?;
            service.push(Request::new(request)).await.map(drop)
        }
        1 => {
            let request = PullRequest::decode(body).map_err(invalid)?;
            service.pull(Request::new(request)).await.map(drop)
        }
        _ => {
            let request = PsfRequest::decode(body).map_err(invalid)?;
            service.call_psf(Request::new(request)).await.map(drop)
        }
    }
}

#[test]
fn server_requests() {
    let runs = Runs::new("server_requests");
    let rt = runtime();
    let service = server(None);
    rt.block_on(create(&service, sparse(), vec![0, 1], false))
        .unwrap();
    rt.block_on(create(&service, dense(), vec![0], false))
        .unwrap();
    for seed in request_seeds() {
        rt.block_on(handle(&service, &seed))
            .expect("every seed is a valid request");
    }
    proptest!(config(), |(input in mutated(request_seeds()))| {
        runs.one(rt.block_on(handle(&service, &input)));
    });
    runs.check();
}

#[test]
fn sketchml_payloads() {
    let runs = Runs::new("sketchml_payloads");
    let keys: Vec<u64> = (0..2_000u64).map(|i| i * 31 + i % 3).collect();
    let values: Vec<f64> = (0..2_000)
        .map(|i| ((i % 97) as f64 - 48.0) * 1e-3)
        .collect();
    let params = "sketchml".parse::<Compression>().unwrap();
    let Compression::SketchMl(params) = params else {
        panic!("sketchml parses as SketchML")
    };
    let seeds = vec![
        sketchml::encode(&keys, &values, &params).unwrap(),
        sketchml::encode(&keys[..10], &values[..10], &params).unwrap(),
    ];
    for seed in &seeds {
        sketchml::decode(seed, 4_000).expect("every seed decodes");
    }
    proptest!(config(), |(input in mutated(seeds))| {
        let decoded = sketchml::decode(&input, 4_000);
        if let Ok((keys, values)) = &decoded {
            prop_assert_eq!(keys.len(), values.len());
            prop_assert!(keys.len() <= 4_000, "decoded past the cap");
        }
        runs.one(decoded);
    });
    runs.check();
}

/// A snapshot file of partition 0 of the sparse matrix: its path and bytes.
fn snapshot_seed(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>) {
    let keys: Vec<u64> = (0..200u64).map(|i| i * 1_000_003).collect();
    let snapshot = PartitionSnapshot {
        matrix: Some(sparse()),
        partition_id: 0,
        version: 3,
        rows: (0..2)
            .map(|row| SnapshotRow {
                row,
                keys: wire::encode_keys(&keys),
                values: wire::encode_values(&vec![0.25f32; keys.len()]),
            })
            .collect(),
        ..Default::default()
    };
    let snapshots = SnapshotDir::parse(&dir.display().to_string()).unwrap();
    snapshots.write_partition(7, &snapshot).unwrap();
    walk(dir)
        .into_iter()
        .map(|path| (std::fs::read(&path).unwrap(), path))
        .find(|(bytes, _)| bytes.starts_with(b"ANGELPT\n"))
        .map(|(bytes, path)| (path, bytes))
        .expect("a partition snapshot file")
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        match path.is_dir() {
            true => files.extend(walk(&path)),
            false => files.push(path),
        }
    }
    files
}

#[test]
fn snapshot_files() {
    let runs = Runs::new("snapshot_files");
    const HEADER: usize = 9;
    let dir = tempfile::tempdir().unwrap();
    let (path, seed) = snapshot_seed(dir.path());
    let body = seed[HEADER..seed.len() - 8].to_vec();
    let rt = runtime();
    let service = server(Some(dir.path()));
    rt.block_on(create(&service, sparse(), vec![0], true))
        .expect("the seed restores");
    let intact = proptest::bool::weighted(0.2);
    proptest!(config(), |(mutated_body in mutated(vec![body]), stale_sum in intact)| {
        // Mostly the body with its checksum made good, so the message and block decoders
        // behind the checksum see the input; one time in five with the seed's checksum.
        let mut file = seed[..HEADER].to_vec();
        file.extend_from_slice(&mutated_body);
        let sum = match stale_sum {
            true => seed[seed.len() - 8..].to_vec(),
            false => xxhash_rust::xxh3::xxh3_64(&file).to_le_bytes().to_vec(),
        };
        file.extend_from_slice(&sum);
        std::fs::write(&path, &file).unwrap();
        rt.block_on(async {
            let _ = service
                .drop_partitions(from_master(angel_proto::DropPartitionsRequest {
                    matrix_id: 7,
                    epoch: 1,
                }))
                .await;
            runs.one(create(&service, sparse(), vec![0], true).await);
        });
    });
    runs.check();
}

/// Writes `bytes` to a file and returns its location.
fn file(dir: &std::path::Path, name: &str, bytes: &[u8]) -> Location {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    Location::parse(&path.display().to_string()).unwrap()
}

#[test]
fn libsvm_lines() {
    let runs = Runs::new("libsvm_lines");
    let dir = tempfile::tempdir().unwrap();
    let seeds = vec![
        b"+1 3:1 11:0.5 14:1\n-1 5:1 7:2.5e-3\n0 1:1\n".to_vec(),
        b"1 2:1 # comment\n\n-1\t4:1\t9:1\n".to_vec(),
    ];
    let options = ["", "bad_rows=skip", "format=dummy", "index_base=0"];
    for seed in &seeds {
        let location = file(dir.path(), "seed.libsvm", seed);
        angel_etl::libsvm::read(&[location], Default::default(), &BadRows::default())
            .expect("every seed reads");
    }
    proptest!(config(), |(input in mutated(seeds), o in 0..options.len())| {
        let location = file(dir.path(), "in.libsvm", &input);
        let options = options[o].parse().unwrap();
        runs.one(angel_etl::libsvm::read(&[location], options, &BadRows::default()));
    });
    runs.check();
}

#[test]
fn csv_lines() {
    let runs = Runs::new("csv_lines");
    let dir = tempfile::tempdir().unwrap();
    let seeds = vec![
        b"age,name,score\n39,Ann,0.5\n50,\"Bo, Jr\",1e3\n,NA,\n".to_vec(),
        b"a|b\n1|2\n3|\"x\"\"y\"\n".to_vec(),
    ];
    let options = ["", "bad_rows=skip", "header=false", "delimiter=|; nulls=NA"];
    let read = |seed: &[u8], options: &str| {
        let location = file(dir.path(), "seed.csv", seed);
        angel_etl::csv::read(&[location], &options.parse().unwrap(), &BadRows::default())
    };
    read(&seeds[0], "").expect("the comma seed reads");
    read(&seeds[1], "delimiter=|").expect("the bar seed reads");
    proptest!(config(), |(input in mutated(seeds), o in 0..options.len())| {
        let location = file(dir.path(), "in.csv", &input);
        let options = options[o].parse().unwrap();
        runs.one(angel_etl::csv::read(&[location], &options, &BadRows::default()));
    });
    runs.check();
}
