//! [`Stores`]: the object store behind each [`Location`], built on first use and kept, so a
//! job opens one S3 client per bucket and one HDFS client per name node.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use hdfs_native_object_store::HdfsObjectStoreBuilder;
use object_store::aws::AmazonS3Builder;
use object_store::client::SpawnedReqwestConnector;
use object_store::local::LocalFileSystem;
use object_store::{ObjectStore, RetryConfig};
use url::Url;

use crate::runtime::io_runtime;
use crate::{Location, Result, StorageError};

/// Object stores by store URL (`file:///`, `s3://bucket`, `hdfs://host:port`).
#[derive(Debug, Default)]
pub struct Stores {
    built: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

/// The process's stores: every reader, writer and SQL session of the process shares them.
pub fn stores() -> &'static Stores {
    static STORES: OnceLock<Stores> = OnceLock::new();
    STORES.get_or_init(Stores::default)
}

impl Stores {
    /// The store holding `location`, built from the environment the first time.
    pub fn get(&self, location: &Location) -> Result<Arc<dyn ObjectStore>> {
        let key = location.store.as_str().to_string();
        if let Some(found) = self.built.lock().expect("stores").get(&key) {
            return Ok(found.clone());
        }
        let built = build(location)?;
        let mut stores = self.built.lock().expect("stores");
        Ok(stores.entry(key).or_insert(built).clone())
    }

    /// Uses `store` for every location in the store `url` names (a store configured in code
    /// rather than from the environment); returns the one it replaces.
    pub fn insert(&self, url: &Url, store: Arc<dyn ObjectStore>) -> Option<Arc<dyn ObjectStore>> {
        self.built
            .lock()
            .expect("stores")
            .insert(url.as_str().to_string(), store)
    }
}

/// Builds the store of `location`: S3 from the `AWS_*` environment, HDFS from
/// `HADOOP_CONF_DIR`.
fn build(location: &Location) -> Result<Arc<dyn ObjectStore>> {
    let url = &location.store;
    let failed = |source| StorageError::store(location, source);
    let host = url.host_str().unwrap_or_default();
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        // Directories emptied by deletes go too, as they would on S3.
        "file" => Arc::new(LocalFileSystem::new().with_automatic_cleanup(true)),
        // Connections live on the storage I/O runtime, whichever runtime calls the store
        // (DataFusion's, a job's): a caller's runtime may end while the store lives on.
        "s3" => Arc::new(
            AmazonS3Builder::from_env()
                .with_bucket_name(host)
                .with_retry(retries())
                .with_http_connector(SpawnedReqwestConnector::new(io_runtime().handle().clone()))
                .build()
                .map_err(failed)?,
        ),
        "hdfs" | "viewfs" => Arc::new(
            HdfsObjectStoreBuilder::new()
                .with_url(url.as_str())
                .with_io_runtime(io_runtime().handle().clone())
                .build()
                .map_err(failed)?,
        ),
        other => {
            return Err(StorageError::BadLocation(format!(
                "no object store for the scheme '{other}' of {location}"
            )));
        }
    };
    tracing::debug!(%url, "object store built");
    Ok(store)
}

/// Retries of S3 requests: a few, within seconds, so an unreachable endpoint or a wrong
/// address fails while the user waits rather than after object_store's default 3 minutes.
fn retries() -> RetryConfig {
    RetryConfig {
        max_retries: 3,
        retry_timeout: Duration::from_secs(20),
        ..RetryConfig::default()
    }
}
