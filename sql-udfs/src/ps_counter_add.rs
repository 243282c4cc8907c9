//! `ps_counter_add(counter, features) -> Int64`: counts features into a distributed counter.
//!
//! An aggregate: each task merges its counts locally and sends each distinct feature once per
//! flush (when the task's partial result is taken, or every `FLUSH_KEYS` distinct features), so
//! training rows never leave the task. Returns the number of feature occurrences counted.
//! The counter is created on first use; seal it with `ps_counter_seal`.

use std::collections::HashMap;
use std::sync::Arc;

use ahash::RandomState;

use angel_client::PsError;
use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Int64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, ColumnarValue, Signature, Volatility,
};

use crate::args::{Features, const_str};
use crate::bridge::{block_on, client};

/// Distinct features a task buffers before sending them.
const FLUSH_KEYS: usize = 1 << 20;

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsCounterAdd {
    master: String,
    signature: Signature,
}

impl PsCounterAdd {
    /// The master address this function is bound to; it travels with plans to Ballista
    /// executors ([`crate::cluster::codec`]).
    pub fn master(&self) -> &str {
        &self.master
    }

    /// The function for the service whose master is at `master`.
    pub fn new(master: &str) -> Self {
        PsCounterAdd {
            master: master.to_string(),
            signature: Signature::any(2, Volatility::Volatile),
        }
    }
}

impl AggregateUDFImpl for PsCounterAdd {
    fn name(&self) -> &str {
        "ps_counter_add"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(CounterAdd {
            master: self.master.clone(),
            counter: None,
            pending: HashMap::default(),
            counted: 0,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let name = format_state_name(args.name, "counted");
        Ok(vec![Arc::new(Field::new(name, DataType::Int64, true))])
    }
}

/// One task's local counts.
#[derive(Debug)]
struct CounterAdd {
    master: String,
    counter: Option<String>,
    pending: HashMap<String, i64, RandomState>,
    counted: i64,
}

impl CounterAdd {
    /// Sends the buffered counts, creating the counter on first use.
    fn flush(&mut self) -> Result<()> {
        let Some(counter) = &self.counter else {
            return Ok(());
        };
        if self.pending.is_empty() {
            return Ok(());
        }
        let client = client(&self.master)?;
        let (keys, deltas): (Vec<&str>, Vec<i64>) =
            self.pending.iter().map(|(k, &v)| (k.as_str(), v)).unzip();
        block_on(async {
            if client.counter(counter).await.is_err() {
                match client.create_counter(counter).await {
                    Ok(_) | Err(PsError::AlreadyExists(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            client.counter_increase(counter, &keys, &deltas).await
        })?;
        self.pending.clear();
        Ok(())
    }
}

impl Accumulator for CounterAdd {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if values[0].is_empty() {
            return Ok(());
        }
        if self.counter.is_none() {
            let name = ColumnarValue::Array(values[0].clone());
            self.counter = Some(const_str("ps_counter_add", &[name], 0, "counter")?);
        }
        let features = Features::from_array("ps_counter_add", &values[1])?;
        for f in features.all() {
            match self.pending.get_mut(f) {
                Some(n) => *n += 1,
                None => {
                    self.pending.insert(f.to_string(), 1);
                }
            }
            self.counted += 1;
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
        std::mem::size_of_val(self) + self.pending.keys().map(|k| k.len() + 40).sum::<usize>()
    }
}
