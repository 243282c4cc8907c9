//! `CREATE MODEL`: creates the model on the PS, trains it for the requested epochs with
//! `ps_train`, evaluates it on the holdout table after each epoch, and returns the epoch table
//! (epoch, rows, train_loss, holdout_loss, holdout_auc, seconds of training, seconds of
//! holdout evaluation).

use std::sync::Arc;
use std::time::{Duration, Instant};

use angel_client::{CounterState, PsClient, PsError};
use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::prelude::SessionContext;
use indicatif::{ProgressBar, ProgressStyle};

use crate::binding::Binding;
use crate::bridge::ps_error;
use crate::model::{Kind, ModelSpec};
use crate::reports::Progress;

/// What `CREATE MODEL` asks for beyond the model itself.
struct Plan {
    spec: ModelSpec,
    epochs: usize,
    holdout: Option<String>,
}

/// Reads the options: model options go to the spec, `epochs` and `holdout` drive training;
/// `counter` (without `dim`) sizes the model from the sealed counter.
async fn plan(master: &str, options: &[(String, String)]) -> Result<Plan> {
    let kind = options
        .iter()
        .find(|(k, _)| k == "kind")
        .map_or("logistic", |(_, v)| v.as_str());
    let mut plan = Plan {
        spec: ModelSpec::new(kind.parse()?, 0),
        epochs: 5,
        holdout: None,
    };
    for (key, value) in options {
        match key.as_str() {
            "epochs" => match value.parse() {
                Ok(n) if n > 0 => plan.epochs = n,
                _ => return plan_err!("epochs must be a positive whole number, got '{value}'"),
            },
            "holdout" => plan.holdout = Some(value.clone()),
            _ => plan.spec.set(key, value)?,
        }
    }
    if let Some(counter) = plan.spec.counter.clone() {
        let size = sealed_size(master, &counter).await?;
        match plan.spec.dim {
            0 => plan.spec.dim = size,
            dim if dim < size => {
                return plan_err!(
                    "CREATE MODEL: dim = {dim} is below the {size} features counter '{counter}' \
                     indexed; leave dim out to take it from the counter"
                );
            }
            _ => {}
        }
    }
    if plan.spec.dim == 0 {
        return plan_err!(
            "CREATE MODEL needs the option dim (number of features) or counter (a sealed counter)"
        );
    }
    Ok(plan)
}

/// The number of features sealed counter `counter` indexed; an error saying what to do when
/// it is missing, not sealed, or indexed nothing.
async fn sealed_size(master: &str, counter: &str) -> Result<u64> {
    let client = crate::bridge::client(master)?;
    client.refresh().await.map_err(ps_error)?;
    let meta = match client.counter(counter).await {
        Ok(c) => c.meta.clone(),
        Err(PsError::NotFound(_)) => {
            return plan_err!(
                "CREATE MODEL option counter = '{counter}': no counter of that name; create and \
                 fill it with ps_counter_add, then seal it with ps_counter_seal"
            );
        }
        Err(e) => return Err(ps_error(e)),
    };
    if meta.state != CounterState::Read as i32 {
        return plan_err!(
            "CREATE MODEL option counter = '{counter}': the counter is not sealed; seal it with \
             ps_counter_seal first"
        );
    }
    if meta.size == 0 {
        return plan_err!(
            "CREATE MODEL option counter = '{counter}': the counter is sealed but indexed no \
             feature (no key was counted min_count = {} times or more)",
            meta.min_count
        );
    }
    Ok(meta.size)
}

/// Checks that the `holdout` option names a table this job can read.
async fn check_holdout(ctx: &SessionContext, holdout: &str) -> Result<()> {
    match ctx.sql(&format!("SELECT * FROM {holdout} LIMIT 0")).await {
        Ok(_) => Ok(()),
        Err(e) => plan_err!("CREATE MODEL option holdout = '{holdout}': {e}"),
    }
}

/// Runs `CREATE MODEL`; see the module documentation.
pub async fn create_model(
    ctx: &SessionContext,
    binding: &Binding,
    name: &str,
    replace: bool,
    options: &[(String, String)],
    query: &str,
) -> Result<RecordBatch> {
    let plan = plan(binding.master(), options).await?;
    if let Some(holdout) = &plan.holdout {
        check_holdout(ctx, holdout).await?;
    }
    let columns = columns(ctx, query).await?;
    let rows = ctx.sql(query).await?.count().await? as u64;
    if rows == 0 {
        return plan_err!("CREATE MODEL {name}: the training query returned no rows");
    }
    let client = binding.client()?;
    if replace {
        match client.drop_matrix(name).await {
            Ok(()) | Err(PsError::NotFound(_)) => {}
            Err(e) => return Err(ps_error(e)),
        }
    }
    let matrix = plan.spec.create(&client, name).await?;
    let bar = bar(rows * plan.epochs as u64);
    let mut table = EpochTable::default();
    for epoch in 1..=plan.epochs {
        let started = Instant::now();
        let before = push_traffic(&client, matrix.meta.id).await?;
        let sql =
            format!("SELECT ps_train('{name}', {columns}), count(*) FROM ({query}) AS train_rows");
        let (loss, n) = watch(
            &bar,
            &binding.reports().progress,
            epoch,
            plan.epochs,
            run_pair(ctx, &sql),
        )
        .await?;
        let trained = started.elapsed();
        let after = push_traffic(&client, matrix.meta.id).await?;
        let traffic = (after.0 - before.0, after.1 - before.1);
        let (holdout_loss, auc) = match &plan.holdout {
            Some(h) => evaluate(ctx, name, plan.spec.kind, &columns, h).await?,
            None => (None, None),
        };
        let rows = float(&n).unwrap_or_default() as i64;
        let evaluated = started.elapsed() - trained;
        table.push(
            epoch,
            rows,
            loss,
            (holdout_loss, auc),
            (trained, evaluated),
            traffic,
        );
    }
    bar.finish_and_clear();
    let batch = table.finish()?;
    let epochs_table = format!("{name}_epochs");
    ctx.deregister_table(&epochs_table)?;
    ctx.register_batch(&epochs_table, batch.clone())?;
    Ok(batch)
}

/// (bytes sent, raw bytes) of every push to matrix `id` so far, from the master's status:
/// what every executor or task pushed, compressed or not.
async fn push_traffic(client: &PsClient, id: u32) -> Result<(u64, u64)> {
    let status = client.status().await.map_err(ps_error)?;
    Ok(angel_proto::pushes::totals(&status)
        .iter()
        .filter(|p| p.matrix_id == id)
        .fold((0, 0), |(b, r), p| (b + p.bytes, r + p.raw_bytes)))
}

/// The query's columns as SQL, quoted: label, indices and optionally values.
async fn columns(ctx: &SessionContext, query: &str) -> Result<String> {
    let df = ctx.sql(query).await?;
    let names: Vec<String> = df
        .schema()
        .fields()
        .iter()
        // Quoted as SQL identifiers: names of unnamed expressions hold quotes themselves.
        .map(|f| format!("\"{}\"", f.name().replace('"', "\"\"")))
        .collect();
    if !(2..=3).contains(&names.len()) {
        return plan_err!(
            "the training query must return label, indices [, values]; it returns {} columns",
            names.len()
        );
    }
    Ok(names.join(", "))
}

/// Holdout loss (the model's loss; squared error for linear models) and AUC (classifiers).
async fn evaluate(
    ctx: &SessionContext,
    model: &str,
    kind: Kind,
    columns: &str,
    holdout: &str,
) -> Result<(Option<f64>, Option<f64>)> {
    let mut cols = columns.split(", ");
    let label = cols.next().unwrap_or_default();
    let features: Vec<&str> = cols.collect();
    let (loss, auc) = match kind {
        Kind::Logistic => ("ps_logloss(y, p)", "ps_auc(y, p)"),
        Kind::Linear => ("avg((p - y) * (p - y))", "CAST(NULL AS DOUBLE)"),
        Kind::Svm => (
            "avg(greatest(0.0, 1.0 - CASE WHEN y > 0 THEN p ELSE -p END))",
            "ps_auc(y, p)",
        ),
    };
    let sql = format!(
        "SELECT {loss}, {auc} FROM (SELECT CAST({label} AS DOUBLE) AS y, ps_predict('{model}', {}) AS p FROM {holdout}) AS scored",
        features.join(", ")
    );
    let (loss, auc) = run_pair(ctx, &sql).await?;
    Ok((float(&loss), float(&auc)))
}

/// Runs a query answering one row of two values.
async fn run_pair(ctx: &SessionContext, sql: &str) -> Result<(ScalarValue, ScalarValue)> {
    let batches = ctx.sql(sql).await?.collect().await?;
    let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
        return plan_err!("no result from: {sql}");
    };
    Ok((
        ScalarValue::try_from_array(batch.column(0), 0)?,
        ScalarValue::try_from_array(batch.column(1), 0)?,
    ))
}

fn float(v: &ScalarValue) -> Option<f64> {
    match v.cast_to(&DataType::Float64) {
        Ok(ScalarValue::Float64(f)) => f,
        _ => None,
    }
}

fn bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {human_pos}/{human_len} rows, {per_sec}, ETA {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar
}

/// Drives `work` while moving the bar with the rows `ps_train` reports, showing the loss.
async fn watch<T>(
    bar: &ProgressBar,
    progress: &Progress,
    epoch: usize,
    epochs: usize,
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    let (rows0, loss0) = progress.snapshot();
    let base = bar.position();
    let update = || {
        let (rows, loss) = progress.snapshot();
        let n = rows - rows0;
        let mean = if n > 0 {
            (loss - loss0) / n as f64
        } else {
            f64::NAN
        };
        bar.set_position(base + n);
        bar.set_message(format!("epoch {epoch}/{epochs} loss {mean:.4}"));
    };
    tokio::pin!(work);
    loop {
        tokio::select! {
            result = &mut work => {
                update();
                return result;
            }
            _ = tokio::time::sleep(Duration::from_millis(200)) => update(),
        }
    }
}

/// The rows of the epoch table being built.
#[derive(Default)]
struct EpochTable {
    epoch: Vec<i64>,
    rows: Vec<i64>,
    train_loss: Vec<Option<f64>>,
    holdout_loss: Vec<Option<f64>>,
    holdout_auc: Vec<Option<f64>>,
    seconds: Vec<f64>,
    holdout_seconds: Vec<f64>,
    push_mb: Vec<f64>,
    raw_mb: Vec<f64>,
}

impl EpochTable {
    /// Adds an epoch: its rows and loss, holdout (loss, AUC), (training, holdout) time and
    /// (sent, raw) push bytes.
    fn push(
        &mut self,
        epoch: usize,
        rows: i64,
        loss: ScalarValue,
        holdout: (Option<f64>, Option<f64>),
        took: (Duration, Duration),
        traffic: (u64, u64),
    ) {
        self.push_mb.push(traffic.0 as f64 / 1e6);
        self.raw_mb.push(traffic.1 as f64 / 1e6);
        self.epoch.push(epoch as i64);
        self.rows.push(rows);
        self.train_loss.push(float(&loss));
        self.holdout_loss.push(holdout.0);
        self.holdout_auc.push(holdout.1);
        self.seconds.push(took.0.as_secs_f64());
        self.holdout_seconds.push(took.1.as_secs_f64());
    }

    fn finish(self) -> Result<RecordBatch> {
        let schema = Schema::new(vec![
            Field::new("epoch", DataType::Int64, false),
            Field::new("rows", DataType::Int64, false),
            Field::new("train_loss", DataType::Float64, true),
            Field::new("holdout_loss", DataType::Float64, true),
            Field::new("holdout_auc", DataType::Float64, true),
            Field::new("seconds", DataType::Float64, false),
            Field::new("holdout_seconds", DataType::Float64, false),
            Field::new("push_mb", DataType::Float64, false),
            Field::new("raw_mb", DataType::Float64, false),
        ]);
        Ok(RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from(self.epoch)),
                Arc::new(Int64Array::from(self.rows)),
                Arc::new(Float64Array::from(self.train_loss)),
                Arc::new(Float64Array::from(self.holdout_loss)),
                Arc::new(Float64Array::from(self.holdout_auc)),
                Arc::new(Float64Array::from(self.seconds)),
                Arc::new(Float64Array::from(self.holdout_seconds)),
                Arc::new(Float64Array::from(self.push_mb)),
                Arc::new(Float64Array::from(self.raw_mb)),
            ],
        )?)
    }
}
