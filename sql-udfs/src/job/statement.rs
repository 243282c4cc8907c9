//! The statements a job file may hold: any SQL DataFusion runs, plus three for models and one
//! for the service.
//!
//! ```sql
//! CREATE [OR REPLACE] MODEL name OPTIONS (key = value, ...) AS SELECT label, indices [, values] FROM ...;
//! TRAIN MODEL name [OPTIONS (epochs = n, holdout = table)] AS SELECT label, indices [, values] FROM ...;
//! SAVE MODEL name TO 'directory';
//! LOAD MODEL name FROM 'directory';
//! SNAPSHOT;
//! ```
//!
//! `CREATE MODEL` trains (the form BigQuery ML users know), `TRAIN MODEL` trains an existing or
//! loaded model on; option values are numbers, quoted strings or bare words.

use datafusion::common::{Result, plan_err};

/// One statement of a job.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// Plain SQL, run by DataFusion.
    Sql(String),
    /// `CREATE [OR REPLACE] TABLE name AS query`: plain SQL on one machine; staged as Parquet
    /// on a cluster, which cannot ship memory tables.
    CreateTable {
        /// Table name as written.
        name: String,
        /// Replace a table of the same name.
        replace: bool,
        /// The query after `AS`.
        query: String,
        /// The whole statement.
        sql: String,
    },
    /// Create a model on the PS and train it on the rows of `query`.
    CreateModel {
        /// Model name.
        name: String,
        /// Replace a model of the same name.
        replace: bool,
        /// `OPTIONS (...)` as (key, value) text pairs, keys lower-cased.
        options: Vec<(String, String)>,
        /// The training rows: label, indices and optionally values, in that order.
        query: String,
    },
    /// Train an existing model on, for more epochs, on the rows of `query`.
    TrainModel {
        /// Model name.
        name: String,
        /// `OPTIONS (...)` as (key, value) text pairs, keys lower-cased.
        options: Vec<(String, String)>,
        /// The training rows, as `CreateModel`'s.
        query: String,
    },
    /// Write a model to a directory.
    SaveModel {
        /// Model name.
        name: String,
        /// Target directory.
        path: String,
    },
    /// Read a model from a directory onto the PS.
    LoadModel {
        /// Model name.
        name: String,
        /// Source directory.
        path: String,
    },
    /// Every server snapshots the partitions that changed, now.
    Snapshot,
}

/// A model statement's name, `OPTIONS` (key, value) pairs and query.
type ModelParts = (String, Vec<(String, String)>, String);

/// Words of `text`, with the byte offset after each (quoted strings are one word).
fn words(text: &str) -> impl Iterator<Item = (&str, usize)> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let rest = &text[pos..];
        let start = pos + (rest.len() - rest.trim_start().len());
        let rest = &text[start..];
        let first = rest.chars().next()?;
        let len = match first {
            '\'' | '"' => rest[1..].find(first).map_or(rest.len(), |i| i + 2),
            '(' | ')' | ',' | '=' => 1,
            _ => rest
                .find(|c: char| c.is_whitespace() || "(),=".contains(c))
                .unwrap_or(rest.len()),
        };
        pos = start + len;
        Some((&text[start..pos], pos))
    })
}

/// Most operators one statement may hold. DataFusion plans an expression by recursion, in
/// time growing with the square of a chain's length: `1+1+...` of 4,000 terms takes 45 s to
/// plan here, and 8,000 overflow the stack, ending the process. Real feature queries hold a
/// few hundred at most.
const MAX_OPERATORS: usize = 2000;

/// Most bytes one statement may hold: parsing and planning take memory several times a
/// statement's size, and data belongs in files (`read_csv`, `read_parquet`), not in `VALUES`.
pub const MAX_STATEMENT_BYTES: usize = 16 << 20;

/// Refuses a statement of more than [`MAX_STATEMENT_BYTES`].
fn check_length(text: &str) -> Result<()> {
    match text.len() > MAX_STATEMENT_BYTES {
        true => plan_err!(
            "the statement holds {} bytes, over the {MAX_STATEMENT_BYTES} a statement may hold; \
             put its data in a file and read it (read_csv, read_parquet, read_libsvm)",
            text.len()
        ),
        false => Ok(()),
    }
}

/// Refuses a statement with more than [`MAX_OPERATORS`] operators (outside quotes: `+ - * / %
/// < > = |` and the words AND and OR; a two-character operator counts twice, which only
/// errs on the safe side).
fn check_operators(text: &str) -> Result<()> {
    let (mut count, mut quote, mut word) = (0, None, String::new());
    for c in text.chars().chain([' ']) {
        if let Some(q) = quote {
            quote = (c != q).then_some(q);
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        count += usize::from(word.eq_ignore_ascii_case("AND") || word.eq_ignore_ascii_case("OR"));
        count += usize::from("+-*/%<>=|".contains(c));
        word.clear();
        if c == '\'' || c == '"' {
            quote = Some(c);
        }
    }
    match count > MAX_OPERATORS {
        true => plan_err!(
            "the statement holds {count} operators (+ - * / % || comparisons AND OR), over the \
             {MAX_OPERATORS} a statement may hold: planning a chain that long takes minutes \
             and then overflows the stack; split the expression (into several columns, or a \
             CASE, or an IN list)"
        ),
        false => Ok(()),
    }
}

fn unquote(word: &str) -> String {
    let quoted = word.len() >= 2 && (word.starts_with('\'') || word.starts_with('"'));
    match quoted {
        true => word[1..word.len() - 1].to_string(),
        false => word.to_string(),
    }
}

impl Statement {
    /// The SQL DataFusion plans for it: the whole of plain SQL, the query of `CREATE TABLE`
    /// and `CREATE MODEL`; none for the others.
    pub fn query(&self) -> Option<&str> {
        match self {
            Statement::Sql(sql) => Some(sql),
            Statement::CreateTable { query, .. }
            | Statement::CreateModel { query, .. }
            | Statement::TrainModel { query, .. } => Some(query),
            _ => None,
        }
    }

    /// Recognises the model statements; everything else is plain SQL. A statement longer
    /// than [`MAX_STATEMENT_BYTES`], with more operators than [`MAX_OPERATORS`], or whose SQL
    /// nests deeper than [`super::depth::MAX_DEPTH`], is refused.
    pub fn parse(text: &str) -> Result<Statement> {
        check_length(text)?;
        check_operators(text)?;
        let statement = Self::recognise(text)?;
        if let Some(sql) = statement.query() {
            super::depth::check(sql)?;
        }
        Ok(statement)
    }

    fn recognise(text: &str) -> Result<Statement> {
        let mut w = words(text).peekable();
        let next_upper = |w: &mut std::iter::Peekable<_>| -> Option<String> {
            w.next().map(|(s, _): (&str, usize)| s.to_ascii_uppercase())
        };
        let first = next_upper(&mut w);
        let second = next_upper(&mut w);
        match (first.as_deref(), second.as_deref()) {
            (Some("SNAPSHOT"), None) => Ok(Statement::Snapshot),
            (Some("CREATE"), Some("MODEL")) => Self::create_model(text, w, false),
            (Some("TRAIN"), Some("MODEL")) => {
                let (name, options, query) = Self::model_statement("TRAIN", text, w)?;
                Ok(Statement::TrainModel {
                    name,
                    options,
                    query,
                })
            }
            (Some("CREATE"), Some("TABLE")) => Ok(Self::create_table(text, w, false)),
            (Some("CREATE"), Some("OR")) => {
                let (a, b) = (next_upper(&mut w), next_upper(&mut w));
                match (a.as_deref(), b.as_deref()) {
                    (Some("REPLACE"), Some("MODEL")) => Self::create_model(text, w, true),
                    (Some("REPLACE"), Some("TABLE")) => Ok(Self::create_table(text, w, true)),
                    _ => Ok(Statement::Sql(text.to_string())),
                }
            }
            (Some(verb @ ("SAVE" | "LOAD")), Some("MODEL")) => {
                let items: Vec<&str> = w.map(|(s, _)| s).collect();
                let preposition = if verb == "SAVE" { "TO" } else { "FROM" };
                match items.as_slice() {
                    [name, p, path] if p.eq_ignore_ascii_case(preposition) => {
                        let (name, path) = (unquote(name), unquote(path));
                        if path.trim().is_empty() {
                            return plan_err!(
                                "{verb} MODEL {name} {preposition} '': the directory is empty"
                            );
                        }
                        Ok(match verb {
                            "SAVE" => Statement::SaveModel { name, path },
                            _ => Statement::LoadModel { name, path },
                        })
                    }
                    _ => plan_err!("expected {verb} MODEL name {preposition} 'directory'"),
                }
            }
            _ => Ok(Statement::Sql(text.to_string())),
        }
    }

    /// `CREATE TABLE name AS query`; any other form (columns, `IF NOT EXISTS`) stays plain SQL.
    fn create_table<'a>(
        text: &str,
        mut w: impl Iterator<Item = (&'a str, usize)>,
        replace: bool,
    ) -> Statement {
        match (w.next(), w.next()) {
            (Some((name, _)), Some((as_word, end))) if as_word.eq_ignore_ascii_case("AS") => {
                Statement::CreateTable {
                    name: name.to_string(),
                    replace,
                    query: text[end..].trim().to_string(),
                    sql: text.to_string(),
                }
            }
            _ => Statement::Sql(text.to_string()),
        }
    }

    fn create_model<'a>(
        text: &str,
        w: impl Iterator<Item = (&'a str, usize)>,
        replace: bool,
    ) -> Result<Statement> {
        let (name, options, query) = Self::model_statement("CREATE", text, w)?;
        Ok(Statement::CreateModel {
            name,
            replace,
            options,
            query,
        })
    }

    /// `<verb> MODEL name [OPTIONS (...)] AS query`, after `MODEL`: the name, the options and
    /// the query.
    fn model_statement<'a>(
        verb: &str,
        text: &str,
        mut w: impl Iterator<Item = (&'a str, usize)>,
    ) -> Result<ModelParts> {
        let usage = format!("expected {verb} MODEL name OPTIONS (key = value, ...) AS SELECT ...");
        let Some((name, _)) = w.next() else {
            return plan_err!("{usage}");
        };
        let mut options = Vec::new();
        let mut next = w.next();
        if next.is_some_and(|(s, _)| s.eq_ignore_ascii_case("OPTIONS")) {
            if w.next().map(|(s, _)| s) != Some("(") {
                return plan_err!("{usage}: '(' must follow OPTIONS");
            }
            loop {
                match (w.next(), w.next(), w.next(), w.next()) {
                    (Some((k, _)), Some(("=", _)), Some((v, _)), Some((sep @ (")" | ","), _))) => {
                        let key = k.to_ascii_lowercase();
                        if options.iter().any(|(seen, _)| *seen == key) {
                            return plan_err!(
                                "{verb} MODEL {}: option '{key}' is given twice",
                                unquote(name)
                            );
                        }
                        options.push((key, unquote(v)));
                        if sep == ")" {
                            break;
                        }
                    }
                    _ => {
                        return plan_err!(
                            "{usage}: options are key = value pairs separated by commas"
                        );
                    }
                }
            }
            next = w.next();
        }
        match next {
            Some((s, end)) if s.eq_ignore_ascii_case("AS") => {
                Ok((unquote(name), options, text[end..].trim().to_string()))
            }
            _ => plan_err!("{usage}: AS and the training query are missing"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_model_statements_and_passes_the_rest_through() {
        let s = Statement::parse(
            "CREATE OR REPLACE MODEL ctr OPTIONS (kind = 'logistic', learning_rate=0.05, optimizer = adam) AS SELECT y, f FROM t",
        )
        .unwrap();
        let Statement::CreateModel {
            name,
            replace,
            options,
            query,
        } = s
        else {
            panic!("{s:?}")
        };
        assert_eq!(
            (name.as_str(), replace, query.as_str()),
            ("ctr", true, "SELECT y, f FROM t")
        );
        assert_eq!(
            options[1],
            ("learning_rate".to_string(), "0.05".to_string())
        );
        assert_eq!(options[2].1, "adam");
        let chain = |n: usize, op: &str| format!("SELECT {} AS x", vec!["a"; n].join(op));
        // Within the depth a chain may reach (job::depth): 400 links pass.
        assert!(Statement::parse(&chain(400, " + ")).is_ok());
        assert!(Statement::parse(&chain(400, " AND ")).is_ok());
        let long = format!("SELECT '{}' AS x", "a".repeat(MAX_STATEMENT_BYTES));
        let err = Statement::parse(&long).unwrap_err().to_string();
        assert!(
            err.contains("over the 16777216 a statement may hold"),
            "{err}"
        );
        let quoted = format!("SELECT '{}' AS x", "+".repeat(10_000));
        assert!(
            Statement::parse(&quoted).is_ok(),
            "operators in quotes count for nothing"
        );
        for op in ["+", " OR "] {
            let err = Statement::parse(&chain(8000, op)).unwrap_err().to_string();
            assert!(
                err.contains("7999 operators") && err.contains("split"),
                "{err}"
            );
        }
        assert_eq!(
            Statement::parse("train model m options (epochs = 2) as SELECT y, f FROM t").unwrap(),
            Statement::TrainModel {
                name: "m".into(),
                options: vec![("epochs".into(), "2".into())],
                query: "SELECT y, f FROM t".into()
            }
        );
        let err = Statement::parse("TRAIN MODEL m").unwrap_err().to_string();
        assert!(err.contains("expected TRAIN MODEL name"), "{err}");
        let twice = "CREATE MODEL m OPTIONS (epochs = 2, Epochs = 3) AS SELECT y, f FROM t";
        let err = Statement::parse(twice).unwrap_err().to_string();
        assert!(err.contains("option 'epochs' is given twice"), "{err}");
        assert_eq!(
            Statement::parse("save model ctr to '/tmp/m'").unwrap(),
            Statement::SaveModel {
                name: "ctr".into(),
                path: "/tmp/m".into()
            }
        );
        assert!(matches!(
            Statement::parse("CREATE VIEW v AS SELECT 1").unwrap(),
            Statement::Sql(_)
        ));
        assert!(matches!(
            Statement::parse("CREATE TABLE t (x INT)").unwrap(),
            Statement::Sql(_)
        ));
        let Statement::CreateTable {
            name,
            replace,
            query,
            ..
        } = Statement::parse("create or replace table t2 as select 1 as x").unwrap()
        else {
            panic!("CREATE TABLE AS not recognised")
        };
        assert_eq!(
            (name.as_str(), replace, query.as_str()),
            ("t2", true, "select 1 as x")
        );
        assert_eq!(Statement::parse(" snapshot ").unwrap(), Statement::Snapshot);
        let err = Statement::parse("SAVE MODEL m TO ''").unwrap_err();
        assert!(err.to_string().contains("the directory is empty"), "{err}");
        let err = Statement::parse("CREATE MODEL m OPTIONS (kind 'x') AS SELECT 1").unwrap_err();
        assert!(err.to_string().contains("key = value"), "{err}");
    }
}
