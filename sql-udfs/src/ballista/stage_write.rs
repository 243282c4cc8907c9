//! Writing a query's rows into the stage where they are computed: each task writes its own
//! partition as one Arrow IPC file, in parallel.
//!
//! `COPY ... TO` would do the same job, but DataFusion's file sink takes one input partition:
//! every row of a `CREATE TABLE` travelled to one task, which wrote all the files. Here
//! partition `p` becomes `part-NNNN.arrow` (`NNNN` = `p`, the global number) in the table's
//! directory, written whole by the task that computed it, so a task run again replaces its
//! file rather than adding one.
//!
//! The query is wrapped in a [`StageWriteNode`] on the client; the scheduler plans it
//! ([`AngelQueryPlanner`]) as a [`StageWriteExec`], and both travel in plans through the
//! [`super::codec`]s. Each task returns one row: the rows it wrote (`count`).

use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, LazyLock};

use angel_storage::Location;
use angel_storage::write::put;
use async_trait::async_trait;
use datafusion::arrow::array::{RecordBatch, UInt64Array};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::ipc::CompressionType;
use datafusion::arrow::ipc::writer::{FileWriter, IpcWriteOptions};
use datafusion::catalog::Session;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, DFSchemaRef, DataFusionError, Result, internal_err};
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::{
    SendableRecordBatchStream, SessionState, SessionStateBuilder, TaskContext,
};
use datafusion::logical_expr::UserDefinedLogicalNodeCore;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{Expr, Extension, LogicalPlan, UserDefinedLogicalNode};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PhysicalExpr, PlanProperties,
};
use datafusion::physical_planner::{DefaultPhysicalPlanner, ExtensionPlanner, PhysicalPlanner};
use futures::TryStreamExt;

/// What a plan codec writes before a stage writer's directory, so its bytes are told apart
/// from Ballista's nodes.
const TAG: &[u8] = b"angel-ps stage write\n";

/// The schema of what each writing task returns: the rows it wrote.
static COUNT: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![Field::new(
        "count",
        DataType::UInt64,
        false,
    )]))
});

/// The logical node: `input`'s rows written into directory `dir` (a URL ending in `/`).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct StageWriteNode {
    dir: String,
    files_per_partition: usize,
    input: LogicalPlan,
    schema: DFSchemaRef,
}

impl StageWriteNode {
    /// `input` written into `dir`, as a plan to run in `state`'s session. Each partition is
    /// dealt into as many files as make the table one file per target partition, so its
    /// scans have as many tasks: the query is planned here, as the scheduler will, to see its
    /// partitions. (A query ending in one partition, such as a sort, a window or a `LIMIT`,
    /// would make a one-file table, which one task scans: one worker training. Ballista turns
    /// off round-robin repartitioning, and DataFusion drops one that nothing above requires.)
    pub async fn plan(state: &SessionState, dir: &str, input: LogicalPlan) -> Result<LogicalPlan> {
        let local = SessionStateBuilder::new_from_existing(state.clone())
            .with_query_planner(Arc::new(AngelQueryPlanner))
            .build();
        let physical = local.create_physical_plan(&input).await?;
        let partitions = physical.properties().partitioning.partition_count().max(1);
        let files = state
            .config()
            .target_partitions()
            .div_ceil(partitions)
            .max(1);
        Self::with_files(dir, files, input)
    }

    fn with_files(
        dir: &str,
        files_per_partition: usize,
        input: LogicalPlan,
    ) -> Result<LogicalPlan> {
        let schema = Arc::new(DFSchema::try_from(COUNT.as_ref().clone())?);
        let node = StageWriteNode {
            dir: dir.to_string(),
            files_per_partition,
            input,
            schema,
        };
        Ok(LogicalPlan::Extension(Extension {
            node: Arc::new(node),
        }))
    }
}

/// Ordered by directory, then input (the schema follows from them).
impl PartialOrd for StageWriteNode {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        let key = |n: &Self| (n.dir.clone(), n.files_per_partition);
        (key(self), &self.input).partial_cmp(&(key(other), &other.input))
    }
}

impl UserDefinedLogicalNodeCore for StageWriteNode {
    fn name(&self) -> &str {
        "StageWrite"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.input]
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        Vec::new()
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "StageWrite: {}", self.dir)
    }

    fn with_exprs_and_inputs(&self, _exprs: Vec<Expr>, inputs: Vec<LogicalPlan>) -> Result<Self> {
        let [input] = <[LogicalPlan; 1]>::try_from(inputs)
            .map_err(|_| DataFusionError::Internal("StageWrite has one input".into()))?;
        Ok(StageWriteNode {
            dir: self.dir.clone(),
            files_per_partition: self.files_per_partition,
            input,
            schema: self.schema.clone(),
        })
    }
}

/// The physical node: each partition of `input` written as one file into `dir`.
#[derive(Debug)]
pub struct StageWriteExec {
    dir: String,
    input: Arc<dyn ExecutionPlan>,
    /// The global number of each partition, by the number it is executed under: a Ballista
    /// task numbers its partitions from 0 ([`number_partitions`]). Empty: the same numbers.
    partitions: Vec<usize>,
    /// Files each partition is dealt into ([`StageWriteNode::plan`]).
    files_per_partition: usize,
    properties: Arc<PlanProperties>,
}

impl StageWriteExec {
    fn new(dir: String, files_per_partition: usize, input: Arc<dyn ExecutionPlan>) -> Self {
        StageWriteExec {
            dir,
            input: input.clone(),
            partitions: Vec::new(),
            files_per_partition: files_per_partition.max(1),
            properties: Self::properties_over(&input),
        }
    }

    /// The same writer over `input` (partitions and files kept).
    fn with_input(&self, input: Arc<dyn ExecutionPlan>) -> Self {
        StageWriteExec {
            dir: self.dir.clone(),
            properties: Self::properties_over(&input),
            input,
            partitions: self.partitions.clone(),
            files_per_partition: self.files_per_partition,
        }
    }

    fn properties_over(input: &Arc<dyn ExecutionPlan>) -> Arc<PlanProperties> {
        let partitions = input.properties().partitioning.partition_count();
        let properties = PlanProperties::new(
            EquivalenceProperties::new(COUNT.clone()),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        Arc::new(properties)
    }

    /// The files partition `local` writes, numbered from its global number.
    fn files(&self, local: usize) -> Result<Vec<Location>> {
        let global = match self.partitions.get(local) {
            Some(&global) => global,
            None if self.partitions.is_empty() => local,
            None => return internal_err!("StageWriteExec: no partition {local} in this task"),
        };
        let dir = Location::parse(&self.dir)
            .map_err(|e| DataFusionError::Execution(format!("stage {}: {e}", self.dir)))?;
        let first = global * self.files_per_partition;
        Ok((first..first + self.files_per_partition)
            .map(|n| dir.child(&format!("part-{n:04}.arrow")))
            .collect())
    }
}

/// `plan` of one Ballista task, computing the global `partitions`, with each stage writer
/// naming its files by those numbers (so two tasks never write the same file, and a task run
/// again replaces its own).
pub fn number_partitions(
    plan: Arc<dyn ExecutionPlan>,
    partitions: &[usize],
) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        Ok(match node.downcast_ref::<StageWriteExec>() {
            Some(write) => Transformed::yes(Arc::new(StageWriteExec {
                partitions: partitions.to_vec(),
                ..write.with_input(write.input.clone())
            }) as _),
            None => Transformed::no(node),
        })
    })
    .map(|t| t.data)
}

impl DisplayAs for StageWriteExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "StageWriteExec: {}", self.dir)
    }
}

impl ExecutionPlan for StageWriteExec {
    fn name(&self) -> &str {
        "StageWriteExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let input = super::one_child("StageWriteExec", children)?;
        Ok(Arc::new(self.with_input(input)))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let files = self.files(partition)?;
        let input = self.input.execute(partition, context)?;
        let written = async move {
            let schema = input.schema();
            let batches: Vec<RecordBatch> = input.try_collect().await?;
            let rows = tokio::task::spawn_blocking(move || {
                let mut dealt = vec![Vec::new(); files.len()];
                for (i, batch) in batches.into_iter().enumerate() {
                    dealt[i % files.len()].push(batch);
                }
                (files.iter().zip(&dealt))
                    .map(|(file, batches)| write_file(file, &schema, batches))
                    .sum::<Result<u64>>()
            })
            .await
            .map_err(|e| DataFusionError::Execution(format!("stage writer: {e}")))??;
            Ok(RecordBatch::try_new(
                COUNT.clone(),
                vec![Arc::new(UInt64Array::from(vec![rows]))],
            )?)
        };
        let stream = futures::stream::once(written);
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            COUNT.clone(),
            stream,
        )))
    }
}

/// Writes `batches` as one Arrow IPC file at `file` (LZ4-compressed on an object store);
/// returns the rows written.
pub(super) fn write_file(
    file: &Location,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<u64> {
    let start = std::time::Instant::now();
    // LZ4 costs more time than a local disk's page cache saves; an object store's transfer
    // is worth it.
    let compression = (!file.is_local()).then_some(CompressionType::LZ4_FRAME);
    let options = IpcWriteOptions::default().try_with_compression(compression)?;
    let mut writer = FileWriter::try_new_with_options(Vec::new(), schema, options)?;
    let batches = one_dictionary(schema, batches)?;
    let unified = start.elapsed();
    for batch in &batches {
        writer.write(batch)?;
    }
    let bytes = writer.into_inner()?;
    let encoded = start.elapsed();
    let size = bytes.len();
    put(file, bytes.into())
        .map_err(|e| DataFusionError::Execution(format!("staging {}: {e}", file.url())))?;
    let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
    tracing::debug!(file = %file, rows, size, ?unified, ?encoded, total = ?start.elapsed(), "staged");
    Ok(rows)
}

/// `batches` sharing one dictionary per dictionary column, as an IPC file needs (batches of
/// dictionary features each bring their own; the stream format could hold them, but plans
/// do not say which format a scan reads): the rows concatenated, then sliced as they came.
fn one_dictionary(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
    if batches.len() < 2
        || !schema
            .fields()
            .iter()
            .any(|f| has_dictionary(f.data_type()))
    {
        return Ok(batches.to_vec());
    }
    let whole = concat_batches(schema, batches)?;
    let mut offset = 0;
    Ok(batches
        .iter()
        .map(|b| {
            offset += b.num_rows();
            whole.slice(offset - b.num_rows(), b.num_rows())
        })
        .collect())
}

/// Whether `t` is or holds a dictionary.
fn has_dictionary(t: &DataType) -> bool {
    match t {
        DataType::Dictionary(..) => true,
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => has_dictionary(f.data_type()),
        DataType::Struct(fields) => fields.iter().any(|f| has_dictionary(f.data_type())),
        _ => false,
    }
}

/// Plans [`StageWriteNode`]s; every other node is planned as DataFusion does.
#[derive(Debug)]
struct StageWritePlanner;

#[async_trait]
impl ExtensionPlanner for StageWritePlanner {
    async fn plan_extension(
        &self,
        _planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        _logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        _session: &dyn Session,
        _planning_ctx: &PhysicalPlanningContext,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let Some(node) = node.as_any().downcast_ref::<StageWriteNode>() else {
            return Ok(None);
        };
        match physical_inputs {
            [input] => Ok(Some(Arc::new(StageWriteExec::new(
                node.dir.clone(),
                node.files_per_partition,
                input.clone(),
            )))),
            _ => internal_err!("StageWrite has one input"),
        }
    }
}

/// DataFusion's planner plus [`StageWriteNode`]s: the scheduler's, so it can plan what
/// clients stage.
#[derive(Debug, Default)]
pub struct AngelQueryPlanner;

#[async_trait]
impl QueryPlanner for AngelQueryPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        DefaultPhysicalPlanner::with_extension_planners(vec![Arc::new(StageWritePlanner)])
            .create_physical_plan(logical_plan, session)
            .await
    }
}

/// Writes `node`'s directory and files per partition (tagged) if it is a [`StageWriteNode`];
/// `false` for other nodes.
pub(super) fn encode_logical(node: &Extension, buf: &mut Vec<u8>) -> bool {
    (node.node.as_any().downcast_ref::<StageWriteNode>())
        .map(|n| encode(&n.dir, n.files_per_partition, buf))
        .is_some()
}

/// The [`StageWriteNode`] in `buf` over `inputs`, if `buf` holds one.
pub(super) fn decode_logical(buf: &[u8], inputs: &[LogicalPlan]) -> Result<Option<Extension>> {
    let Some((dir, files)) = decode(buf)? else {
        return Ok(None);
    };
    let [input] = inputs else {
        return internal_err!("StageWrite has one input");
    };
    match StageWriteNode::with_files(&dir, files, input.clone())? {
        LogicalPlan::Extension(extension) => Ok(Some(extension)),
        _ => internal_err!("StageWriteNode::with_files makes an extension"),
    }
}

/// Writes `node`'s directory and files per partition (tagged) if it is a [`StageWriteExec`];
/// `false` for other nodes.
pub(super) fn encode_physical(node: &Arc<dyn ExecutionPlan>, buf: &mut Vec<u8>) -> bool {
    (node.downcast_ref::<StageWriteExec>())
        .map(|n| encode(&n.dir, n.files_per_partition, buf))
        .is_some()
}

/// The [`StageWriteExec`] in `buf` over `inputs`, if `buf` holds one.
pub(super) fn decode_physical(
    buf: &[u8],
    inputs: &[Arc<dyn ExecutionPlan>],
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some((dir, files)) = decode(buf)? else {
        return Ok(None);
    };
    match inputs {
        [input] => Ok(Some(Arc::new(StageWriteExec::new(
            dir,
            files,
            input.clone(),
        )))),
        _ => internal_err!("StageWriteExec has one input"),
    }
}

/// `TAG`, the files per partition and a newline, then the directory.
fn encode(dir: &str, files_per_partition: usize, buf: &mut Vec<u8>) {
    buf.extend_from_slice(TAG);
    buf.extend_from_slice(format!("{files_per_partition}\n{dir}").as_bytes());
}

/// The directory and files per partition [`encode`] wrote, if `buf` starts with `TAG`.
fn decode(buf: &[u8]) -> Result<Option<(String, usize)>> {
    let Some(text) = buf.strip_prefix(TAG) else {
        return Ok(None);
    };
    let bad = || DataFusionError::Internal("stage write: a node's bytes are garbled".into());
    let text = std::str::from_utf8(text).map_err(|_| bad())?;
    let (files, dir) = text.split_once('\n').ok_or_else(bad)?;
    let files = files.parse::<usize>().map_err(|_| bad())?;
    Ok(Some((dir.to_string(), files)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ballista::stage::arrow_table;
    use datafusion::arrow::array::{AsArray, DictionaryArray, Int64Array};
    use datafusion::arrow::datatypes::{Int32Type, Int64Type, UInt64Type};
    use datafusion::arrow::util::display::array_value_to_string;
    use datafusion::datasource::MemTable;
    use datafusion::logical_expr::EmptyRelation;
    use datafusion::physical_plan::empty::EmptyExec;
    use datafusion::prelude::{DataFrame, SessionConfig, SessionContext};

    fn batch(x: Vec<i64>, word: Vec<&str>) -> RecordBatch {
        let word: DictionaryArray<Int32Type> = word.into_iter().collect();
        RecordBatch::try_from_iter([
            ("x", Arc::new(Int64Array::from(x)) as _),
            ("word", Arc::new(word) as _),
        ])
        .unwrap()
    }

    /// Two partitions in a session of 4 target partitions (without round-robin
    /// repartitioning, as on Ballista) make 4 files, batches with different dictionaries
    /// included, and the files read back as the same rows.
    #[tokio::test]
    async fn partitions_are_dealt_into_one_file_per_target_partition_and_read_back() {
        let partitions = vec![
            vec![batch(vec![1, 2], vec!["a", "b"]), batch(vec![3], vec!["c"])],
            vec![batch(vec![4, 5], vec!["b", "d"])],
        ];
        let schema = partitions[0][0].schema();
        let stage = tempfile::tempdir().unwrap();
        let dir = format!("{}/t/", stage.path().display());
        let mut config = SessionConfig::new().with_target_partitions(4);
        config
            .options_mut()
            .optimizer
            .enable_round_robin_repartition = false;
        let state = SessionStateBuilder::new()
            .with_default_features()
            .with_config(config)
            .with_query_planner(Arc::new(AngelQueryPlanner))
            .build();
        let ctx = SessionContext::new_with_state(state);
        let table = MemTable::try_new(schema.clone(), partitions).unwrap();
        ctx.register_table("rows", Arc::new(table)).unwrap();
        let query = ctx.sql("SELECT x, word FROM rows").await.unwrap();
        let write = StageWriteNode::plan(&ctx.state(), &dir, query.into_unoptimized_plan())
            .await
            .unwrap();
        let counts = DataFrame::new(ctx.state(), write).collect().await.unwrap();
        let written: u64 = (counts.iter())
            .map(|b| {
                b.column(0)
                    .as_primitive::<UInt64Type>()
                    .values()
                    .iter()
                    .sum::<u64>()
            })
            .sum();
        assert_eq!(written, 5);
        let mut files: Vec<String> = std::fs::read_dir(stage.path().join("t"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        files.sort();
        let expected: Vec<String> = (0..4).map(|n| format!("part-{n:04}.arrow")).collect();
        assert_eq!(files, expected);

        ctx.register_table("back", arrow_table(&dir, schema).unwrap())
            .unwrap();
        let sql = "SELECT sum(x) AS s, string_agg(CAST(word AS VARCHAR), '' ORDER BY x) AS w \
                   FROM back";
        let back = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        assert_eq!(back[0].column(0).as_primitive::<Int64Type>().value(0), 15);
        assert_eq!(
            array_value_to_string(back[0].column(1), 0).unwrap(),
            "abcbd"
        );
    }

    /// Plans carry the writer's directory and files through both codecs, and a task's writer
    /// numbers its files from its partition's global number.
    #[test]
    fn the_writer_travels_and_tasks_number_files_by_global_partition() {
        let input: Arc<dyn ExecutionPlan> = Arc::new(EmptyExec::new(COUNT.clone()));
        let exec: Arc<dyn ExecutionPlan> = Arc::new(StageWriteExec::new(
            "s3://b/stage/t/".into(),
            3,
            input.clone(),
        ));
        let numbered = number_partitions(exec, &[6]).unwrap();
        let mut buf = Vec::new();
        assert!(encode_physical(&numbered, &mut buf));
        let numbered = numbered.downcast_ref::<StageWriteExec>().unwrap();
        let names: Vec<String> = (numbered.files(0).unwrap().iter())
            .map(|f| f.url())
            .collect();
        let expected: Vec<String> = (18..21)
            .map(|n| format!("s3://b/stage/t/part-{n:04}.arrow"))
            .collect();
        assert_eq!(names, expected);
        assert!(
            numbered.files(1).is_err(),
            "a task computes only its own partitions"
        );
        let back = decode_physical(&buf, &[input]).unwrap().unwrap();
        let back = back.downcast_ref::<StageWriteExec>().unwrap();
        assert_eq!(back.dir, "s3://b/stage/t/");
        assert_eq!(back.files_per_partition, 3);

        let empty = LogicalPlan::EmptyRelation(EmptyRelation {
            produce_one_row: false,
            schema: Arc::new(DFSchema::empty()),
        });
        let LogicalPlan::Extension(node) =
            StageWriteNode::with_files("s3://b/stage/u/", 2, empty.clone()).unwrap()
        else {
            panic!("a stage writer is an extension node")
        };
        let mut buf = Vec::new();
        assert!(encode_logical(&node, &mut buf));
        let back = decode_logical(&buf, &[empty]).unwrap().unwrap();
        let node = node.node.as_any().downcast_ref::<StageWriteNode>();
        assert_eq!(back.node.as_any().downcast_ref::<StageWriteNode>(), node);
        assert!(decode_physical(b"other bytes", &[]).unwrap().is_none());
    }
}
