//! Plan codecs that carry each PS-bound function's master address and namespace across the network.
//!
//! Ballista ships plans as protobuf in which a function is only its name plus optional bytes.
//! Our PS-bound functions are bound to a master address, so the client, the scheduler and the
//! executors all use these codecs: encoding writes the bound address as the function's bytes,
//! decoding rebuilds the function bound to it. Executors therefore need no per-job flags, and
//! one executor can serve jobs against different services. They also carry the
//! [`super::stage_write`] nodes. Everything else is delegated to Ballista's own codecs.

use std::sync::Arc;

use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result, TableReference};
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{AggregateUDF, Extension, LogicalPlan, ScalarUDF, WindowUDF};
use datafusion::physical_expr_common::physical_expr::proto_decode::PhysicalExprDecodeCtx;
use datafusion::physical_expr_common::physical_expr::proto_encode::PhysicalExprEncodeCtx;
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};

use super::stage_write;
use crate::binding::Binding;
use crate::bound_functions::{self, Bound};

/// The master and namespace `node` is bound to (`MASTER\nNAMESPACE`, or `MASTER` for none),
/// if it is one of `list`; `None` for other functions.
fn master_of<U>(list: &[Bound<U>], node: &U) -> Option<String> {
    list.iter()
        .find_map(|f| (f.binding)(node))
        .map(|b| match b.namespace() {
            "" => b.master().to_string(),
            namespace => format!("{}\n{namespace}", b.master()),
        })
}

/// Writes a PS-bound function's master and namespace as its bytes; `false` for other functions.
fn write_master(master: Option<String>, buf: &mut Vec<u8>) -> bool {
    master
        .map(|m| buf.extend_from_slice(m.as_bytes()))
        .is_some()
}

/// The function of `list` named `name`, bound to the master carried in `buf`, if `name` is
/// one of them.
fn decode<U>(
    list: &[Bound<U>],
    name: &str,
    buf: &[u8],
    name_of: fn(&U) -> &str,
) -> Result<Option<Arc<U>>> {
    let master = String::from_utf8(buf.to_vec()).map_err(|_| {
        DataFusionError::Internal(format!(
            "angel-ps function {name}: master address is not UTF-8"
        ))
    })?;
    let (master, namespace) = master.split_once('\n').unwrap_or((&master, ""));
    let binding = Binding::remote(master).in_namespace(namespace);
    Ok(list
        .iter()
        .map(|f| (f.make)(binding.clone()))
        .find(|f| name_of(f) == name)
        .map(Arc::new))
}

/// The four function hooks, the same in the logical and the physical codec: PS-bound functions
/// carry their master, every other function goes to Ballista's codec (`self.inner`).
macro_rules! ps_function_methods {
    () => {
        fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
            match decode(&bound_functions::scalars(), name, buf, ScalarUDF::name)? {
                Some(f) => Ok(f),
                None => self.inner.try_decode_udf(name, buf),
            }
        }

        fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
            match write_master(master_of(&bound_functions::scalars(), node), buf) {
                true => Ok(()),
                false => self.inner.try_encode_udf(node, buf),
            }
        }

        fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
            match decode(
                &bound_functions::aggregates(),
                name,
                buf,
                AggregateUDF::name,
            )? {
                Some(f) => Ok(f),
                None => self.inner.try_decode_udaf(name, buf),
            }
        }

        fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
            match write_master(master_of(&bound_functions::aggregates(), node), buf) {
                true => Ok(()),
                false => self.inner.try_encode_udaf(node, buf),
            }
        }
    };
}

/// Ballista's logical codec plus the master addresses of PS-bound functions.
#[derive(Debug)]
pub struct AngelLogicalCodec {
    inner: Arc<dyn LogicalExtensionCodec>,
}

impl Default for AngelLogicalCodec {
    fn default() -> Self {
        AngelLogicalCodec {
            inner: Arc::new(BallistaLogicalExtensionCodec::default()),
        }
    }
}

impl LogicalExtensionCodec for AngelLogicalCodec {
    ps_function_methods!();

    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[LogicalPlan],
        ctx: &TaskContext,
    ) -> Result<Extension> {
        match stage_write::decode_logical(buf, inputs)? {
            Some(node) => Ok(node),
            None => self.inner.try_decode(buf, inputs, ctx),
        }
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> Result<()> {
        match stage_write::encode_logical(node, buf) {
            true => Ok(()),
            false => self.inner.try_encode(node, buf),
        }
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        self.inner
            .try_decode_table_provider(buf, table_ref, schema, ctx)
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        self.inner.try_encode_table_provider(table_ref, node, buf)
    }

    fn try_decode_file_format(
        &self,
        buf: &[u8],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn FileFormatFactory>> {
        self.inner.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(
        &self,
        buf: &mut Vec<u8>,
        node: Arc<dyn FileFormatFactory>,
    ) -> Result<()> {
        self.inner.try_encode_file_format(buf, node)
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udwf(node, buf)
    }
}

/// Ballista's physical codec plus the master addresses of PS-bound functions.
#[derive(Debug)]
pub struct AngelPhysicalCodec {
    inner: Arc<dyn PhysicalExtensionCodec>,
}

impl Default for AngelPhysicalCodec {
    fn default() -> Self {
        AngelPhysicalCodec {
            inner: Arc::new(BallistaPhysicalExtensionCodec::default()),
        }
    }
}

impl PhysicalExtensionCodec for AngelPhysicalCodec {
    ps_function_methods!();

    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match stage_write::decode_physical(buf, inputs)? {
            Some(node) => Ok(node),
            None => self.inner.try_decode(buf, inputs, ctx, proto_converter),
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        match stage_write::encode_physical(&node, buf) {
            true => Ok(()),
            false => self.inner.try_encode(node, buf, proto_converter),
        }
    }

    fn try_decode_expr(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn PhysicalExpr>],
        ctx: &PhysicalExprDecodeCtx<'_>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        self.inner.try_decode_expr(buf, inputs, ctx)
    }

    fn try_encode_expr(
        &self,
        node: &Arc<dyn PhysicalExpr>,
        buf: &mut Vec<u8>,
        ctx: &PhysicalExprEncodeCtx<'_>,
    ) -> Result<()> {
        self.inner.try_encode_expr(node, buf, ctx)
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udwf(node, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ps_functions_travel_with_their_master() {
        let codec = AngelPhysicalCodec::default();
        let scalars = bound_functions::scalars();
        for f in scalars
            .iter()
            .map(|f| (f.make)(Binding::remote("10.0.0.1:7000").in_namespace("team")))
        {
            let mut buf = Vec::new();
            codec.try_encode_udf(&f, &mut buf).unwrap();
            let back = codec.try_decode_udf(f.name(), &buf).unwrap();
            let master = master_of(&scalars, &back);
            assert_eq!(
                master.as_deref(),
                Some("10.0.0.1:7000\nteam"),
                "{}",
                f.name()
            );
        }
        let logical = AngelLogicalCodec::default();
        let aggregates = bound_functions::aggregates();
        for f in aggregates
            .iter()
            .map(|f| (f.make)(Binding::remote("10.0.0.2:7000")))
        {
            let mut buf = Vec::new();
            logical.try_encode_udaf(&f, &mut buf).unwrap();
            let back = logical.try_decode_udaf(f.name(), &buf).unwrap();
            let master = master_of(&aggregates, &back);
            assert_eq!(master.as_deref(), Some("10.0.0.2:7000"), "{}", f.name());
        }
    }

    #[test]
    fn other_functions_carry_nothing_and_unknown_names_fail() {
        let codec = AngelPhysicalCodec::default();
        let hash = ScalarUDF::from(crate::ps_hash::PsHash::default());
        let mut buf = Vec::new();
        codec.try_encode_udf(&hash, &mut buf).unwrap();
        assert!(buf.is_empty());
        let err = codec.try_decode_udf("no_such_function", b"x").unwrap_err();
        assert!(err.to_string().contains("no_such_function"), "{err}");
    }
}
