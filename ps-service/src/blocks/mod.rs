//! How a server holds its partitions in memory.
//!
//! - [`sparse_map`]: [`SparseMap`], a compact open-addressing map from u64 key to value.
//! - [`row`]: [`RowStore`], one row of a block (dense array or sparse map), and the
//!   [`RowView`] / [`RowViewMut`] traits PS functions read and write rows through.
//! - [`counter_block`]: [`CounterBlock`], the string keys of one counter partition.
//! - [`block`]: [`Block`], the rows x columns rectangle of one partition, and [`AnyBlock`],
//!   a block of any value type.
//! - [`growth`]: [`Growth`], what a write may add to its rows' memory.

pub mod block;
pub mod counter_block;
pub mod growth;
pub mod row;
pub mod sparse_map;

pub use block::{AnyBlock, Block};
pub use counter_block::{CounterBlock, Phase};
pub use growth::Growth;
pub use row::{RowStore, RowView, RowViewMut};
pub use sparse_map::SparseMap;
