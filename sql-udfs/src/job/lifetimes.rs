//! How long the tables and views a job creates live: until the last statement that uses them.
//! A job file is known whole before it runs, so the statement after which no later one names a
//! table is known too; the job drops the table there, and its memory (or its files on disk) is
//! freed while the job goes on. In the demo job, the raw logs are gone once the features are
//! built from them, and the feature tables once they are indexed.
//!
//! A use is any mention of the name as a word, in any later statement: in SQL, in a model's
//! options (`holdout = 'test'`), inside a string. A view's use is a use of every table and
//! view it names, as it was created. Over-counting uses only keeps a table longer, never drops
//! it early. Names are compared without case. Only bare names (no schema) that a `CREATE
//! TABLE` or `CREATE VIEW` of the job made are dropped: a table registered by other means is
//! never touched.

use std::collections::{HashMap, HashSet};

/// For each statement of a job, the tables and views to drop after it ran: those it created
/// or used that no later statement uses. Names are as DataFusion keeps them (unquoted names in
/// lower case).
pub fn drops_after(statements: &[String]) -> Vec<Vec<String>> {
    let mut created: HashMap<String, String> = HashMap::new();
    let mut view_uses: HashMap<String, HashSet<String>> = HashMap::new();
    let mut last_use: HashMap<String, usize> = HashMap::new();
    for (index, sql) in statements.iter().enumerate() {
        let words = words(sql);
        let made = creation(sql);
        let mut uses: HashSet<String> = HashSet::new();
        for word in &words {
            if created.contains_key(word) || made.as_ref().is_some_and(|m| m.key == *word) {
                uses.insert(word.clone());
                uses.extend(view_uses.get(word).into_iter().flatten().cloned());
            }
        }
        if let Some(made) = made {
            if made.view {
                let mut named = uses.clone();
                named.remove(&made.key);
                view_uses.insert(made.key.clone(), named);
            } else {
                view_uses.remove(&made.key);
            }
            created.insert(made.key, made.name);
        }
        for name in uses {
            last_use.insert(name, index);
        }
    }
    let mut drops = vec![Vec::new(); statements.len()];
    for (key, index) in last_use {
        if let Some(name) = created.get(&key) {
            drops[index].push(name.clone());
        }
    }
    for names in &mut drops {
        names.sort();
    }
    drops
}

/// What a `CREATE [OR REPLACE] [EXTERNAL] TABLE|VIEW [IF NOT EXISTS] name` makes.
struct Made {
    /// The name as DataFusion registers it.
    name: String,
    /// The name compared with words (lower case).
    key: String,
    /// A view rather than a table.
    view: bool,
}

/// The table or view `sql` creates, if it is a `CREATE TABLE` or `CREATE VIEW` of a bare name.
fn creation(sql: &str) -> Option<Made> {
    let mut tokens = tokens(sql).into_iter();
    if !tokens.next()?.eq_ignore_ascii_case("create") {
        return None;
    }
    let skipped = [
        "or",
        "replace",
        "external",
        "temporary",
        "temp",
        "unbounded",
    ];
    let view = loop {
        let token = tokens.next()?.to_ascii_lowercase();
        match token.as_str() {
            "table" => break false,
            "view" => break true,
            t if skipped.contains(&t) => continue,
            _ => return None,
        }
    };
    let mut name = tokens.next()?;
    if name.eq_ignore_ascii_case("if") {
        // IF NOT EXISTS
        tokens.next()?;
        tokens.next()?;
        name = tokens.next()?;
    }
    if tokens.next().as_deref() == Some(".") {
        return None;
    }
    let name = match name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
        Some(quoted) => quoted.to_string(),
        None => name.to_ascii_lowercase(),
    };
    let key = name.to_lowercase();
    (!key.is_empty()).then_some(Made { name, key, view })
}

/// The words of `sql` in lower case: runs of letters, digits and underscores, wherever they
/// stand (quoted names and strings included).
fn words(sql: &str) -> HashSet<String> {
    sql.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The first tokens of `sql`: words, double-quoted names (quotes kept) and single punctuation
/// marks, enough to read a `CREATE` statement's head.
fn tokens(sql: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' {
            let mut quoted = String::from(chars.next().unwrap_or('"'));
            for c in chars.by_ref() {
                quoted.push(c);
                if c == '"' {
                    break;
                }
            }
            tokens.push(quoted);
        } else if c.is_alphanumeric() || c == '_' {
            let mut word = String::new();
            while let Some(&c) = chars.peek().filter(|c| c.is_alphanumeric() || **c == '_') {
                word.push(c);
                chars.next();
            }
            tokens.push(word);
        } else {
            tokens.push(chars.next().map(String::from).unwrap_or_default());
        }
        if tokens.len() > 12 {
            break;
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(statements: &[&str]) -> Vec<Vec<String>> {
        drops_after(&statements.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn a_table_is_dropped_after_the_last_statement_naming_it() {
        let drops = plan(&[
            "CREATE TABLE logs AS SELECT * FROM read_csv('x.csv')",
            "CREATE TABLE train AS SELECT label FROM logs WHERE id % 10 <> 0",
            "CREATE TABLE test AS SELECT label FROM logs WHERE id % 10 = 0",
            "CREATE MODEL m OPTIONS (holdout = 'test') AS SELECT label FROM train",
            "SELECT 1",
        ]);
        assert_eq!(drops[0], Vec::<String>::new());
        assert_eq!(drops[2], vec!["logs"]);
        // The holdout option names the test table: it lives as long as the model statement.
        assert_eq!(drops[3], vec!["test", "train"]);
        assert!(drops[4].is_empty());
    }

    #[test]
    fn a_view_keeps_the_tables_it_names_until_its_own_last_use() {
        let drops = plan(&[
            "CREATE TABLE logs AS SELECT 1 AS a",
            "CREATE VIEW examples AS SELECT a FROM logs",
            "SELECT 2",
            "CREATE TABLE f AS SELECT a FROM examples",
            "SELECT a FROM f",
        ]);
        assert!(drops[1].is_empty() && drops[2].is_empty());
        assert_eq!(drops[3], vec!["examples", "logs"]);
        assert_eq!(drops[4], vec!["f"]);
    }

    #[test]
    fn names_are_read_as_datafusion_keeps_them_and_others_are_never_dropped() {
        let drops = plan(&[
            "create or replace table IF NOT EXISTS Logs as select 1",
            "CREATE VIEW \"Mixed\" AS SELECT * FROM logs",
            "CREATE TABLE s.t AS SELECT 1",
            "SELECT * FROM registered_elsewhere, \"Mixed\", s.t",
        ]);
        assert_eq!(drops[3], vec!["Mixed", "logs"]);
        assert!(
            drops
                .iter()
                .flatten()
                .all(|n| n != "t" && n != "registered_elsewhere")
        );
    }

    #[test]
    fn a_table_never_used_is_dropped_after_its_creation() {
        let drops = plan(&["CREATE TABLE unused AS SELECT 1", "SELECT 2"]);
        assert_eq!(drops[0], vec!["unused"]);
    }
}
