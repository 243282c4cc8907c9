//! The default saved format, `weights.parquet`: `feature` (the counter key, null for the
//! intercept and for models without a counter), `index`, `output` (the class of a softmax
//! model; 0 for one-output kinds), `weight`, and `state`, the optimizer's state of that weight
//! (Adagrad's sum of squares, Adam's moments, FTRL's z and n): every feature of the
//! dictionary and every weight or state that is not zero; index `dim` is the intercept. The
//! optimizer state is loaded too, so a loaded model trains on (`TRAIN MODEL`) where it
//! stopped; a model saved before the state was kept trains on with fresh state.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::sync::Arc;

use angel_client::PsClient;
use angel_proto::Layout;
use arrow::array::{
    Array, AsArray, Float32Array, ListArray, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Float32Type, Schema, SchemaRef, UInt32Type, UInt64Type};
use futures::future::try_join_all;

use super::dictionary::{check_counter_size, check_features, restore_counter};
use super::{ReadBack, Saved, SavedTable, TableSink, file_error};
use crate::error::{Result, input_err};
use crate::model::ModelSpec;

/// The table of the default format.
pub fn table() -> SavedTable {
    SavedTable {
        name: "weights",
        file: "weights.parquet",
        schema: weights_schema(),
    }
}

/// Saves model `name` of `spec` to `sink`, its features named by `features`: every row of
/// its matrix, read block by block and page by page from the servers (sparse rows as the
/// keys they hold), so that what the client holds at once is a page, whatever the model's
/// dimension.
pub async fn save(
    client: &PsClient,
    name: &str,
    spec: &ModelSpec,
    features: &HashMap<u64, String>,
    sink: &mut dyn TableSink,
) -> Result<Saved> {
    let matrix = client.matrix(name).await?;
    let all = matrix.meta.rows as usize;
    let group = (all / spec.kind.weight_rows().max(1)).max(1);
    // A full-batch model's history is worth nothing without the job's record of it.
    let kept = match spec.solver.method {
        Some(_) => 1,
        None => group,
    };
    let mut dictionary: Vec<u64> = features.keys().copied().collect();
    dictionary.sort_unstable();
    for output in 0..all / group {
        let rows: Vec<u64> = (output * group..output * group + kept)
            .map(|r| r as u64)
            .collect();
        for cols in blocks(&matrix.layout, &rows)? {
            let mut from = cols.start;
            while from < cols.end {
                let page = Page::read(client, (name, &rows), from..cols.end).await?;
                from = page.cols.end;
                let batch = page.batch((name, spec, output), &dictionary, features)?;
                if batch.num_rows() > 0 {
                    sink.write(0, batch).await?;
                }
            }
        }
    }
    Ok(Saved::default())
}

/// Pairs a page reads of each row of a block at most: about 6 MB on the wire.
const PAGE_PAIRS: u64 = 1 << 18;

/// The column ranges within which each of `rows` lies in one block of `layout`: the blocks
/// of their bands, cut where any of them is.
fn blocks(layout: &Layout, rows: &[u64]) -> Result<Vec<Range<u64>>> {
    let mut cuts = BTreeSet::new();
    for &row in rows {
        let band = layout.band(row)?;
        for pos in 0..band.len() {
            cuts.insert(band.cols(pos).start);
            cuts.insert(band.cols(pos).end);
        }
    }
    let cuts: Vec<u64> = cuts.into_iter().collect();
    Ok(cuts.windows(2).map(|w| w[0]..w[1]).collect())
}

/// What a page read of a model's rows in some columns: each column where a row is not zero,
/// with every row's value there.
struct Page {
    /// The columns the page covers completely.
    cols: Range<u64>,
    values: BTreeMap<u64, Vec<f32>>,
}

impl Page {
    /// The next page of rows `rows` of matrix `name` from the start of `cols` (within one
    /// block of each row): each row answers at most `PAGE_PAIRS` pairs, its lowest columns,
    /// so the page ends where the first row's full answer does.
    async fn read(
        client: &PsClient,
        (name, rows): (&str, &[u64]),
        cols: Range<u64>,
    ) -> Result<Page> {
        let asked = rows
            .iter()
            .map(|&r| client.nonzeros((name, r), cols.clone(), PAGE_PAIRS));
        let answers = try_join_all(asked).await?;
        let end = (answers.iter())
            .filter(|a| a.len() as u64 >= PAGE_PAIRS)
            .filter_map(|a| a.last().map(|p| p.0 + 1))
            .min()
            .unwrap_or(cols.end);
        let mut values = BTreeMap::new();
        for (j, answer) in answers.iter().enumerate() {
            for &(col, value) in answer.iter().take_while(|p| p.0 < end) {
                let at = values.entry(col).or_insert_with(|| vec![0.0; rows.len()]);
                at[j] = value as f32;
            }
        }
        Ok(Page {
            cols: cols.start..end,
            values,
        })
    }

    /// The rows of `weights.parquet` this page holds of output `output` of model `name` (of
    /// `spec`): every index where a weight or state is not zero, every feature of the
    /// dictionary (`dictionary`, ascending, named by `features`), and the intercept. A NaN or
    /// infinite value (the training diverged) is refused, naming the model: LOAD MODEL would
    /// refuse the file.
    fn batch(
        mut self,
        (name, spec, output): (&str, &ModelSpec, usize),
        dictionary: &[u64],
        features: &HashMap<u64, String>,
    ) -> Result<RecordBatch> {
        let width = self.values.values().next().map_or(1, Vec::len);
        let first = dictionary.partition_point(|&i| i < self.cols.start);
        let named = dictionary[first..]
            .iter()
            .take_while(|&&i| i < self.cols.end);
        let intercept = Some(spec.dim).filter(|d| self.cols.contains(d));
        for &index in named.chain(intercept.as_ref()) {
            self.values.entry(index).or_insert_with(|| vec![0.0; width]);
        }
        let (mut index, mut weight, mut state) = (Vec::new(), Vec::new(), Vec::new());
        for (i, values) in self.values {
            if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
                return input_err(format!(
                    "model '{name}' cannot be saved: its weight or optimizer state of index \
                     {i} (output {output}) is {bad}; its training diverged (LOAD MODEL would \
                     refuse the file)"
                ));
            }
            index.push(i);
            weight.push(values[0]);
            state.push(Some(
                values[1..].iter().map(|v| Some(*v)).collect::<Vec<_>>(),
            ));
        }
        let feature: StringArray = index.iter().map(|i| features.get(i).cloned()).collect();
        let outputs = UInt32Array::from(vec![output as u32; index.len()]);
        Ok(RecordBatch::try_new(
            weights_schema(),
            vec![
                Arc::new(feature),
                Arc::new(UInt64Array::from(index)),
                Arc::new(outputs),
                Arc::new(Float32Array::from(weight)),
                Arc::new(ListArray::from_iter_primitive::<Float32Type, _, _>(state)),
            ],
        )?)
    }
}

/// Loads the weights read back in `read` onto the service as model `name` of `spec`.
pub async fn load(client: &PsClient, name: &str, spec: &ModelSpec, read: &ReadBack) -> Result<()> {
    let table = &read.tables[0];
    let saved = read_weights(&table.path, &table.batches)?;
    let indices: Vec<u64> = saved.rows.iter().map(|r| r.index).collect();
    check_dim(&read.at, read.dim, spec, &indices, &saved.features)?;
    push_weights(client, name, (&read.at, spec), saved).await
}

/// The columns of `weights.parquet`.
fn weights_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("feature", DataType::Utf8, true),
        Field::new("index", DataType::UInt64, false),
        // Nullable: files saved before these columns read them as NULL.
        Field::new("output", DataType::UInt32, true),
        Field::new("weight", DataType::Float32, false),
        Field::new(
            "state",
            DataType::List(Arc::new(Field::new_list_field(DataType::Float32, true))),
            true,
        ),
    ]))
}

/// Pushes `saved` weights of the model saved at `at` onto the service as model `name` of
/// `spec`, its counter rebuilt first.
async fn push_weights(
    client: &PsClient,
    name: &str,
    (at, spec): (&str, &ModelSpec),
    saved: SavedWeights,
) -> Result<()> {
    if let Some(counter) = &spec.counter {
        restore_counter(client, counter, &saved.features).await?;
        check_counter_size(client, at, counter, spec.dim).await?;
    }
    let outputs = spec.kind.weight_rows();
    if let Some(r) = saved.rows.iter().find(|r| r.output as usize >= outputs) {
        return input_err(format!(
            "{at}: weights.parquet has output {} for index {}; the {} model has {outputs}",
            r.output,
            r.index,
            spec.kind.name()
        ));
    }
    let matrix = spec.create(client, name).await?;
    let group = matrix.meta.rows as usize / outputs;
    if let Some(r) = saved
        .rows
        .iter()
        .find(|r| !r.state.is_empty() && r.state.len() != group - 1)
    {
        return input_err(format!(
            "{at}: weights.parquet holds {} values of optimizer state for index {}, but \
             optimizer '{}' keeps {}",
            r.state.len(),
            r.index,
            spec.optimizer.name,
            group - 1
        ));
    }
    for o in 0..outputs {
        let of_output: Vec<&SavedWeight> = saved
            .rows
            .iter()
            .filter(|r| r.output as usize == o)
            .collect();
        let keys: Vec<u64> = of_output.iter().map(|r| r.index).collect();
        for j in 0..group {
            let values: Vec<f32> = of_output
                .iter()
                .map(|r| match j {
                    0 => r.weight,
                    j => r.state.get(j - 1).copied().unwrap_or_default(),
                })
                .collect();
            if j > 0 && values.iter().all(|v| *v == 0.0) {
                continue;
            }
            let row = (o * group + j) as u64;
            client.push_keys(name, row, &keys, &values).await?;
        }
    }
    Ok(())
}

/// One row of `weights.parquet`.
struct SavedWeight {
    index: u64,
    output: u32,
    weight: f32,
    state: Vec<f32>,
}

/// What `weights.parquet` holds: its rows, and the dictionary's (feature, index) pairs.
struct SavedWeights {
    rows: Vec<SavedWeight>,
    features: Vec<(String, u64)>,
}

/// Reads `weights.parquet` (`batches`, from `path`), refusing what would load wrong with the
/// file and row named: a missing or mistyped column, a NULL or infinite value, an index
/// given twice for one output.
fn read_weights(path: &str, batches: &[RecordBatch]) -> Result<SavedWeights> {
    let mut saved = SavedWeights {
        rows: Vec::new(),
        features: Vec::new(),
    };
    let mut seen = std::collections::HashSet::new();
    for batch in batches {
        let column = |n: &str| {
            batch
                .column_by_name(n)
                .cloned()
                .ok_or_else(|| file_error(&path, format!("no column '{n}'")))
        };
        let typed =
            |n: &str, t: &str| file_error(&path, format!("column '{n}' is not of type {t}"));
        // Any string type (DataFusion's own COPY writes Utf8View).
        let f = arrow::compute::cast(&column("feature")?, &DataType::Utf8)
            .map_err(|_| typed("feature", "string"))?;
        let f = f.as_string::<i32>();
        let i = column("index")?;
        let i = i
            .as_primitive_opt::<UInt64Type>()
            .ok_or_else(|| typed("index", "UInt64"))?;
        let w = column("weight")?;
        let w = w
            .as_primitive_opt::<Float32Type>()
            .ok_or_else(|| typed("weight", "Float32"))?;
        // Absent in files saved before multi-output models and saved optimizer state.
        let o = batch.column_by_name("output");
        let o = match o {
            None => None,
            Some(o) => Some(
                o.as_primitive_opt::<UInt32Type>()
                    .ok_or_else(|| typed("output", "UInt32"))?,
            ),
        };
        let st = batch.column_by_name("state");
        let st = match st {
            None => None,
            Some(st) => Some(
                st.as_list_opt::<i32>()
                    .ok_or_else(|| typed("state", "a list of Float32"))?,
            ),
        };
        for r in 0..batch.num_rows() {
            let row = saved.rows.len() + 1;
            if i.is_null(r) || w.is_null(r) {
                return input_err(format!(
                    "{path}: row {row}: the index or the weight is NULL"
                ));
            }
            let (index, weight) = (i.value(r), w.value(r));
            let output = o.filter(|o| o.is_valid(r)).map_or(0, |o| o.value(r));
            let state: Vec<f32> = match st.filter(|st| st.is_valid(r)) {
                None => Vec::new(),
                Some(st) => {
                    let values = st.value(r);
                    let values = values
                        .as_primitive_opt::<Float32Type>()
                        .ok_or_else(|| typed("state", "a list of Float32"))?;
                    values.iter().map(Option::unwrap_or_default).collect()
                }
            };
            if !weight.is_finite() {
                return input_err(format!(
                    "{path}: row {row}: the weight of index {index} is {weight}"
                ));
            }
            if let Some(bad) = state.iter().find(|v| !v.is_finite()) {
                return input_err(format!(
                    "{path}: row {row}: the optimizer state of index {index} holds {bad}"
                ));
            }
            if !seen.insert((output, index)) {
                return input_err(format!(
                    "{path}: row {row}: index {index} is given a second time (output {output})"
                ));
            }
            if f.is_valid(r) && output == 0 {
                saved.features.push((f.value(r).to_string(), index));
            }
            saved.rows.push(SavedWeight {
                index,
                output,
                weight,
                state,
            });
        }
    }
    Ok(saved)
}

/// Checks the dimension agrees everywhere the saved model states it: `model.json`'s `dim`,
/// its options, and `weights.parquet`, whose last index is the intercept's, `dim`, and whose
/// dictionary features all lie below it. A model loaded with another dimension would read the
/// intercept from a feature's weight. Runs before anything is created on the service.
fn check_dim(
    dir: &str,
    saved_dim: u64,
    spec: &ModelSpec,
    indices: &[u64],
    features: &[(String, u64)],
) -> Result<()> {
    let intercept = indices.iter().max().copied();
    if saved_dim != spec.dim || intercept != Some(spec.dim) {
        return input_err(format!(
            "{dir}: the saved model disagrees on its dimension: model.json says dim {} (options: \
             {}), weights.parquet has the intercept at index {}; the files do not belong \
             together",
            saved_dim,
            spec.dim,
            intercept.map_or("none".to_string(), |i| i.to_string())
        ));
    }
    check_features(dir, features, spec.dim)
}
