//! [`S3Server`]: a real implementation of the S3 protocol (s3s over a temporary folder whose
//! subfolders are buckets) on 127.0.0.1, for jobs that read, write and stage on S3 as they
//! would on AWS, MinIO or Ceph. Clients sign requests with [`KEY`] and [`SECRET`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The access key the server accepts.
pub const KEY: &str = "angel-test-key";
/// The secret the server accepts.
pub const SECRET: &str = "angel-test-secret";

/// See the module documentation. Stops when dropped.
pub struct S3Server {
    /// Where it listens.
    pub addr: SocketAddr,
    root: tempfile::TempDir,
    runtime: Option<tokio::runtime::Runtime>,
}

impl S3Server {
    /// Starts a server with (empty) `buckets`.
    pub fn start(buckets: &[&str]) -> S3Server {
        let root = tempfile::tempdir().expect("a temporary folder");
        for bucket in buckets {
            std::fs::create_dir_all(root.path().join(bucket)).expect("a bucket folder");
        }
        let filesystem = s3s_fs::FileSystem::new(root.path()).expect("s3s-fs root");
        let mut builder = s3s::service::S3ServiceBuilder::new(filesystem);
        builder.set_auth(s3s::auth::SimpleAuth::from_single(KEY, SECRET));
        let service = builder.build();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("the S3 server's runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("a port on 127.0.0.1");
        let addr = listener.local_addr().expect("a bound address");
        runtime.spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let service = service.clone();
                tokio::spawn(async move {
                    let builder = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    );
                    let io = hyper_util::rt::TokioIo::new(socket);
                    let _ = builder.serve_connection(io, service).await;
                });
            }
        });
        S3Server {
            addr,
            root,
            runtime: Some(runtime),
        }
    }

    /// The folder behind `bucket/key`, to put inputs in place and check outputs.
    pub fn path(&self, bucket_and_key: &str) -> PathBuf {
        self.root.path().join(bucket_and_key)
    }

    /// Copies the local file `from` to `bucket/key`.
    pub fn put(&self, from: &Path, bucket_and_key: &str) {
        let to = self.path(bucket_and_key);
        std::fs::create_dir_all(to.parent().expect("a key in a bucket")).expect("a folder");
        std::fs::copy(from, &to).expect("an object copied in");
    }

    /// The environment an S3 client needs for this server, signing with `secret`.
    pub fn env(&self, secret: &str) -> Vec<(String, String)> {
        [
            ("AWS_ACCESS_KEY_ID", KEY.to_string()),
            ("AWS_SECRET_ACCESS_KEY", secret.to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ENDPOINT", format!("http://{}", self.addr)),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .to_vec()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
