//! The first centres of a k-means model, written by `CREATE MODEL` before its first
//! iteration as option `init` says: k-means++ over a uniform sample of the rows, k-means||
//! over every row ([`super::parallel`]), `k` rows drawn uniformly, or a table of them.

use super::sampling::{read, sample, write_centres};
use super::{Init, KMeans, parallel, seeding};
use crate::error::Result;
use crate::model::Engine;

/// Rows k-means++ draws its centres from, at most: a uniform sample of the training rows.
pub const SAMPLE: usize = 50_000;

/// Writes the first centres of the statement's k-means model (fresh, every value zero), as
/// `kmeans`'s `init` says, from its training rows.
pub async fn first_centres(engine: &dyn Engine, kmeans: &KMeans) -> Result<()> {
    let dim = engine.plan().spec.dim as usize;
    let centres = match (&kmeans.init_table, kmeans.init) {
        (Some(table), _) => {
            let points = read(engine, &format!("SELECT * FROM {table}")).await?;
            let what = format!("the init table {table}");
            seeding::first_rows(&points, kmeans.k, dim, &what)?
        }
        (None, Init::Random) => {
            let points = sample(engine, (kmeans.k, kmeans.seed)).await?;
            seeding::first_rows(&points, kmeans.k, dim, "the training query")?
        }
        (None, Init::PlusPlus) => {
            let points = sample(engine, (SAMPLE, kmeans.seed)).await?;
            seeding::plus_plus(&points, None, (kmeans.k, dim), kmeans.seed)?
        }
        (None, Init::Parallel) => parallel::centres(engine, kmeans).await?,
    };
    write_centres(engine.client(), engine.model(), &centres, dim).await
}
