//! Counters a job fills start afresh. Before a statement first counts into a counter
//! (`ps_counter_add('name', ...)`) in this run of the job, the job replaces that counter: the
//! counts of an earlier run (one killed mid-way, or a finished one in the same `--namespace`)
//! never mix into this run's, and a counter an earlier run sealed does not stop a re-run.
//! Later statements of the same run count on into it.

use std::collections::HashSet;

use datafusion::common::Result;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::{Expr, LogicalPlan};
use parking_lot::Mutex;

use crate::ps_counter_add::NAME;

/// The counters this run of a job has started.
#[derive(Debug, Default)]
pub struct Started(Mutex<HashSet<String>>);

impl Started {
    /// The counters `plan` counts into that this run has not started yet.
    pub fn fresh_in(&self, plan: &LogicalPlan) -> Result<Vec<String>> {
        let started = self.0.lock();
        let mut names = counted_in(plan)?;
        names.retain(|n| !started.contains(n));
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Marks `name` started, once it was replaced.
    pub fn mark(&self, name: &str) {
        self.0.lock().insert(name.to_string());
    }
}

/// The counters `plan` counts into: the literal first arguments of its `ps_counter_add` calls,
/// subqueries included.
fn counted_in(plan: &LogicalPlan) -> Result<Vec<String>> {
    let mut names = Vec::new();
    plan.apply_with_subqueries(|node| {
        node.apply_expressions(|expr| {
            expr.apply(|e| {
                if let Expr::AggregateFunction(f) = e
                    && f.func.name() == NAME
                    && let Some(Expr::Literal(value, _)) = f.params.args.first()
                    && let Some(Some(name)) = value.try_as_str()
                {
                    names.push(name.to_string());
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    })?;
    Ok(names)
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::SessionContext;

    use super::*;
    use crate::binding::Binding;

    #[tokio::test]
    async fn a_counter_is_fresh_once_per_run_wherever_the_statement_counts_into_it() {
        let ctx = SessionContext::new();
        crate::register_all(&ctx, &Binding::remote("127.0.0.1:1"), None);
        ctx.sql("CREATE TABLE t AS VALUES (make_array('a'))")
            .await
            .unwrap();
        let plan = |sql: &'static str| {
            let state = ctx.state();
            async move { state.create_logical_plan(sql).await.unwrap() }
        };
        let started = Started::default();
        let first = plan("SELECT ps_counter_add('c', column1) FROM t").await;
        assert_eq!(started.fresh_in(&first).unwrap(), ["c"]);
        assert_eq!(
            started.fresh_in(&first).unwrap(),
            ["c"],
            "not started until marked"
        );
        started.mark("c");
        assert!(started.fresh_in(&first).unwrap().is_empty(), "once per run");
        let nested = plan(
            "SELECT * FROM (SELECT ps_counter_add('d', column1) AS n FROM t) \
             WHERE n > (SELECT ps_counter_add('e', column1) FROM t)",
        )
        .await;
        let mut fresh = started.fresh_in(&nested).unwrap();
        fresh.sort();
        assert_eq!(fresh, ["d", "e"]);
        let none = plan("SELECT count(*) FROM t").await;
        assert!(started.fresh_in(&none).unwrap().is_empty());
    }
}
