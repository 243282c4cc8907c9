//! `ps_counter_add(counter, features) -> Int64`: counts features into a distributed counter.
//!
//! An aggregate: each task merges its counts locally and sends each distinct feature once per
//! flush (when the task's partial result is taken, or every `FLUSH_KEYS` distinct features), so
//! training rows never leave the task. Returns the number of feature occurrences counted.
//! The counter is created on first use; seal it with `ps_counter_seal`. The counter name is a
//! constant, read once per task from the call's literal.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use ahash::RandomState;

use angel_client::PsError;
use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Int64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, Documentation, Signature, Volatility,
};

use crate::args::{Arg, DOC_SECTION, arity, const_str, name_type};
use crate::binding::{Binding, PsBound};
use crate::bridge::block_on;
use crate::features::{Features, features_type};
use angel_client::ChangeNames;

/// The function's name in SQL.
pub const NAME: &str = "ps_counter_add";
const COUNTER: Arg = Arg::new(NAME, 0, "counter");
const FEATURES: Arg = Arg::new(NAME, 1, "features");

/// Distinct features a task buffers before sending them.
const FLUSH_KEYS: usize = 1 << 20;
/// Bytes a buffered feature takes beside its text: the string's header, its count and the
/// hash table's slot.
const ENTRY_BYTES: usize = 40;

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsCounterAdd {
    binding: Binding,
    signature: Signature,
}

impl PsBound for PsCounterAdd {
    fn bind(binding: Binding) -> Self {
        PsCounterAdd {
            binding,
            signature: Signature::user_defined(Volatility::Volatile),
        }
    }

    fn binding(&self) -> &Binding {
        &self.binding
    }
}

impl AggregateUDFImpl for PsCounterAdd {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(
            self.name(),
            "ps_counter_add(counter, features)",
            args,
            2..=2,
        )?;
        Ok(vec![
            name_type(COUNTER, &args[0])?,
            features_type(FEATURES, &args[1])?,
        ])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(CounterAdd {
            binding: self.binding.clone(),
            counter: const_str(COUNTER, COUNTER.literal_expr(args.exprs))?,
            pending: HashMap::default(),
            pending_bytes: 0,
            counted: 0,
            names: None,
            flushed: false,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let name = format_state_name(args.name, "counted");
        Ok(vec![Arc::new(Field::new(name, DataType::Int64, true))])
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "Counts features into a distributed counter, created on first use, and \
                 returns the number of feature occurrences counted. An aggregate: each task \
                 merges its counts and sends each distinct feature once per flush, so rows \
                 never leave the task. Seal the counter with ps_counter_seal.",
                "ps_counter_add(counter, features)",
            )
            .with_argument("counter", "The counter's name: a constant string.")
            .with_argument("features", "A string or a list of strings per row.")
            .with_sql_example(
                "SELECT ps_counter_add('adult_features', features) AS counted FROM people",
            )
            .with_related_udf("ps_counter_seal")
            .build()
        });
        Some(&DOC)
    }
}

/// One task's local counts.
#[derive(Debug)]
struct CounterAdd {
    binding: Binding,
    counter: String,
    pending: HashMap<String, i64, RandomState>,
    /// Bytes `pending` holds, kept as it grows: DataFusion asks for the size after every batch.
    pending_bytes: usize,
    counted: i64,
    /// Names of its flushes in a Ballista task, so a rerun of the task repeats them.
    names: Option<ChangeNames>,
    /// Whether it sent counts yet: before the first, the map is refreshed, since the job may
    /// have replaced the counter after this process cached it (an executor's client).
    flushed: bool,
}

impl CounterAdd {
    /// Sends the buffered counts, creating the counter on first use.
    fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let (counter, names) = (&self.counter, &mut self.names);
        let client = self.binding.client()?;
        let (keys, deltas): (Vec<&str>, Vec<i64>) =
            self.pending.iter().map(|(k, &v)| (k.as_str(), v)).unzip();
        let first = !self.flushed;
        block_on(async {
            if first {
                client.refresh().await?;
            }
            if client.counter(counter).await.is_err() {
                match client.create_counter(counter).await {
                    Ok(_) | Err(PsError::AlreadyExists(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            match names.as_mut().map(ChangeNames::next_change) {
                Some(c) => {
                    client
                        .task_counter_increase(c, counter, &keys, &deltas)
                        .await
                }
                None => client.counter_increase(counter, &keys, &deltas).await,
            }
        })?;
        self.flushed = true;
        self.pending.clear();
        self.pending_bytes = 0;
        Ok(())
    }
}

impl Accumulator for CounterAdd {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if self.names.is_none() && self.counted == 0 {
            self.names = ChangeNames::for_accumulator();
        }
        let features = Features::from_array(FEATURES.function, FEATURES.column(values)?)?;
        for (code, n) in features.counts().into_iter().enumerate() {
            if n == 0 {
                continue;
            }
            let f = features.string(code);
            match self.pending.get_mut(f) {
                Some(count) => *count += i64::from(n),
                None => {
                    self.pending.insert(f.to_string(), i64::from(n));
                    self.pending_bytes += f.len() + ENTRY_BYTES;
                }
            }
            self.counted += i64::from(n);
        }
        if self.pending.len() >= FLUSH_KEYS {
            self.flush()?;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.flush()?;
        Ok(vec![ScalarValue::Int64(Some(self.counted))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.counted += states[0]
            .as_primitive::<Int64Type>()
            .iter()
            .flatten()
            .sum::<i64>();
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.flush()?;
        Ok(ScalarValue::Int64(Some(self.counted)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.pending_bytes
    }
}
