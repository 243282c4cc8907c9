//! [`StoreRegistry`]: DataFusion's object stores are angel-storage's, so every URL a path
//! takes works in SQL too (`CREATE EXTERNAL TABLE ... LOCATION 's3://...'`, `COPY ... TO`,
//! staged tables), built lazily from the environment on first use. The client, the Ballista
//! scheduler and every executor build their sessions with [`runtime_env`].

use std::sync::Arc;

use angel_storage::{Location, stores};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::object_store::ObjectStoreRegistry;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use object_store::ObjectStore;
use url::Url;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct StoreRegistry;

impl ObjectStoreRegistry for StoreRegistry {
    fn register_store(
        &self,
        url: &Url,
        store: Arc<dyn ObjectStore>,
    ) -> Option<Arc<dyn ObjectStore>> {
        let location = Location::parse(url.as_str()).ok()?;
        stores().insert(&location.store, store)
    }

    fn get_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        let location = Location::parse(url.as_str())
            .map_err(|e| DataFusionError::Configuration(e.to_string()))?;
        stores()
            .get(&location)
            .map_err(|e| DataFusionError::External(Box::new(e)))
    }
}

/// A runtime whose object stores are angel-storage's; temporary files (spills) go to
/// `temp_dir` when given. With a `memory_limit` (bytes), operators share that much memory
/// fairly and spill what does not fit.
pub fn runtime_env(temp_dir: Option<&str>, memory_limit: Option<usize>) -> Result<Arc<RuntimeEnv>> {
    let mut builder = RuntimeEnvBuilder::new().with_object_store_registry(Arc::new(StoreRegistry));
    if let Some(dir) = temp_dir {
        builder = builder.with_temp_file_path(dir);
    }
    if let Some(limit) = memory_limit {
        builder = builder.with_memory_pool(Arc::new(FairSpillPool::new(limit)));
    }
    Ok(Arc::new(builder.build()?))
}
