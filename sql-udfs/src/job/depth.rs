//! How deep a statement nests: refused past [`MAX_DEPTH`] before DataFusion sees it.
//!
//! SQL's chains (`a + b + ...`, `x::BIGINT::BIGINT ...`, `x IS NOT NULL IS NOT NULL ...`,
//! `SELECT ... UNION ALL SELECT ...`) parse without recursion into trees as deep as the chain,
//! and planning them recurses: 10,000 casts, 10,000 `IS NOT NULL` or 5,000 `UNION ALL`
//! overflowed the stack and aborted the process, and a chain's planning time grows with the
//! square of its length. The operator count of [`super::statement`] misses every form but
//! the operators, so this walks the parsed statement instead: every expression form and every
//! set operation counts one level. The walk stops at the first level past the limit, on a
//! thread of its own; a tree that deep is leaked rather than dropped, which would recurse.

use std::ops::ControlFlow;

use datafusion::common::plan_err;
use datafusion::error::Result;
use datafusion::sql::sqlparser::ast::{Expr, Query, SetExpr, Visit, Visitor};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// Deepest a statement's expressions and set operations may nest. Feature queries nest a few
/// levels; a sum of a few hundred columns written as one chain still fits.
pub const MAX_DEPTH: usize = 500;

/// The stack of the thread that parses and walks a statement: the walk stops one level past
/// [`MAX_DEPTH`], and a tree deeper than that is never dropped.
const STACK_BYTES: usize = 64 << 20;

/// Refuses `sql` when its expressions or set operations nest deeper than [`MAX_DEPTH`].
/// SQL that does not parse passes: DataFusion names its error.
pub fn check(sql: &str) -> Result<()> {
    let sql = sql.to_string();
    let depth = std::thread::Builder::new()
        .name("angel-ps-depth".into())
        .stack_size(STACK_BYTES)
        .spawn(move || deepest(&sql))
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?
        .join()
        .unwrap_or(Some(usize::MAX));
    match depth {
        Some(depth) if depth > MAX_DEPTH => plan_err!(
            "the statement nests more than {MAX_DEPTH} levels deep, the most a statement may \
             (each expression, cast, IS test, UNION or other set operation is a level): \
             planning it would take minutes or overflow the stack; split the chain (into \
             several columns or tables, a CASE, or an IN list)"
        ),
        _ => Ok(()),
    }
}

/// The deepest nesting of `sql`'s statements, counted up to one past [`MAX_DEPTH`]; None
/// when it does not parse.
fn deepest(sql: &str) -> Option<usize> {
    let statements = Parser::parse_sql(&GenericDialect {}, sql).ok()?;
    let mut depth = Depth::default();
    for statement in &statements {
        if statement.visit(&mut depth).is_break() {
            // Dropping a tree recurses as deep as it is: a refused statement's tree is
            // leaked instead, once, as the price of the statement that made it.
            std::mem::forget(statements);
            return Some(depth.deepest);
        }
    }
    Some(depth.deepest)
}

/// Counts nesting while the visitor walks a statement.
#[derive(Default)]
struct Depth {
    /// Expressions open around the one visited.
    open: usize,
    /// The deepest seen.
    deepest: usize,
}

impl Depth {
    fn reach(&mut self, depth: usize) -> ControlFlow<()> {
        self.deepest = self.deepest.max(depth);
        match depth > MAX_DEPTH {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        }
    }
}

impl Visitor for Depth {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        // Set operations nest without a hook of their own: measured before the walk goes
        // down them, on top of the expressions around the query.
        self.reach(self.open + set_depth(&query.body))
    }

    fn pre_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<()> {
        self.open += 1;
        self.reach(self.open)
    }

    fn post_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<()> {
        self.open -= 1;
        ControlFlow::Continue(())
    }
}

/// How deep set operations nest in `body`, without recursing (a chain of `UNION ALL` is a
/// tree as deep as the chain); a query in parentheses is measured when the walk reaches it.
fn set_depth(body: &SetExpr) -> usize {
    let (mut stack, mut deepest) = (vec![(body, 0usize)], 0);
    while let Some((set, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        if let SetExpr::SetOperation { left, right, .. } = set {
            stack.push((left, depth + 1));
            stack.push((right, depth + 1));
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain of each form `n` levels deep. (Prefix forms such as `NOT NOT ...` and
    /// parentheses recurse in the parser, whose limit of 50 refuses them first.)
    fn chains(n: usize) -> Vec<(&'static str, String)> {
        vec![
            ("+", format!("SELECT 1{} AS x", " + 1".repeat(n))),
            ("::", format!("SELECT 1{} AS x", "::BIGINT".repeat(n))),
            (
                "IS NOT NULL",
                format!("SELECT 1{} AS x", " IS NOT NULL".repeat(n)),
            ),
            (
                "UNION ALL",
                format!("SELECT 1 AS x{}", " UNION ALL SELECT 1".repeat(n)),
            ),
            (
                "a cast in a sum",
                format!("SELECT 1{} AS x", " + 1::BIGINT".repeat(n)),
            ),
        ]
    }

    #[test]
    fn every_chain_form_past_the_limit_is_refused_and_at_it_passes() {
        for (form, sql) in chains(MAX_DEPTH + 1) {
            let err = check(&sql).expect_err(form).to_string();
            assert!(
                err.contains("more than 500") && err.contains("split"),
                "{form}: {err}"
            );
        }
        for (form, sql) in chains(MAX_DEPTH - 2) {
            check(&sql).unwrap_or_else(|e| panic!("{form}: {e}"));
        }
    }

    #[test]
    fn a_chain_of_a_hundred_thousand_links_is_refused_without_a_crash() {
        for (form, sql) in chains(100_000) {
            assert!(check(&sql).is_err(), "{form}");
        }
    }

    #[test]
    fn a_wide_statement_and_sql_that_does_not_parse_pass() {
        let wide: Vec<String> = (0..3000).map(|i| format!("c{i}::BIGINT + 1")).collect();
        check(&format!("SELECT {} FROM t", wide.join(", "))).unwrap();
        check("SELEKT 1 +").unwrap();
    }
}
