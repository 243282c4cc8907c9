//! A job file as text: `${name}` variables substituted, then cut into statements at
//! semicolons outside quotes and comments.

use std::collections::HashMap;

use datafusion::common::{Result, plan_err};

/// Replaces every `${name}` with its value, and `${name:-default}` with its value or the
/// default; an unknown name without a default is an error naming it. A value never changes
/// the statements around it: inside quotes its quotes are doubled (it stays one string or
/// identifier), and outside quotes only a plain word (letters, digits, `_ . : / + -`) is
/// accepted, so a value with a quote, `;` or comment cannot add SQL of its own.
pub fn substitute(text: &str, vars: &HashMap<String, String>) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut context = Context::Sql;
    while let Some(start) = rest.find("${") {
        context = context.after(&rest[..start]);
        out.push_str(&rest[..start]);
        let Some(len) = rest[start..].find('}') else {
            return plan_err!("unclosed '${{' in the job file");
        };
        let (name, default) = match rest[start + 2..start + len].split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (&rest[start + 2..start + len], None),
        };
        match vars.get(name).map(String::as_str).or(default) {
            Some(v) => out.push_str(&context.quote(name, v)?),
            None => {
                return plan_err!("the job uses ${{{name}}} but no --var {name}=... was given");
            }
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Where in the SQL text a `${name}` stands.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Context {
    Sql,
    /// Inside '...' (a string) or "..." (an identifier).
    Quoted(char),
    LineComment,
    BlockComment(u32),
}

impl Context {
    /// The context after `text`, read from this one.
    fn after(self, text: &str) -> Context {
        let mut chars = text.chars().peekable();
        let mut context = self;
        while let Some(c) = chars.next() {
            let next = chars.peek().copied();
            context = match (context, c, next) {
                (Context::Sql, '\'' | '"', _) => Context::Quoted(c),
                (Context::Sql, '-', Some('-')) => Context::LineComment,
                (Context::Sql, '/', Some('*')) => {
                    chars.next();
                    Context::BlockComment(1)
                }
                (Context::Quoted(q), c, _) if c == q => Context::Sql,
                (Context::LineComment, '\n', _) => Context::Sql,
                (Context::BlockComment(d), '*', Some('/')) => {
                    chars.next();
                    if d == 1 {
                        Context::Sql
                    } else {
                        Context::BlockComment(d - 1)
                    }
                }
                (Context::BlockComment(d), '/', Some('*')) => {
                    chars.next();
                    Context::BlockComment(d + 1)
                }
                (context, _, _) => context,
            };
        }
        context
    }

    /// `value` of variable `name` as it may stand here.
    fn quote(self, name: &str, value: &str) -> Result<String> {
        match self {
            Context::Quoted(q) => Ok(value.replace(q, &format!("{q}{q}"))),
            Context::LineComment | Context::BlockComment(_) => Ok(value.to_string()),
            Context::Sql => {
                let plain = |c: char| c.is_ascii_alphanumeric() || "_.:/+-".contains(c);
                let comment = value.contains("--") || value.contains("/*");
                if !value.is_empty() && value.chars().all(plain) && !comment {
                    return Ok(value.to_string());
                }
                plan_err!(
                    "--var {name}='{value}': ${{{name}}} stands outside quotes in the job, where \
                     only a plain word (letters, digits, _ . : / + -) may go; quote ${{{name}}} \
                     in the job ('${{{name}}}') to pass other text"
                )
            }
        }
    }
}

/// The statements of a script, each with the 1-based line it starts on, without comments
/// at their start and without the closing semicolon; empty statements are dropped.
pub fn statements(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let (mut current, mut line, mut start_line) = (String::new(), 1, 1);
    let mut chars = text.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if c == '\n' {
            line += 1;
        }
        match quote {
            Some(q) => {
                current.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                current.push(c);
            }
            None if c == '-' && chars.peek() == Some(&'-') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        current.push('\n');
                        break;
                    }
                }
            }
            None if c == '/' && chars.peek() == Some(&'*') => {
                // A block comment (nested ones too, as DataFusion reads them) stays in the
                // statement; a `;` inside it ends nothing.
                current.push(c);
                current.extend(chars.next());
                let (mut depth, mut last) = (1, ' ');
                while depth > 0 {
                    let Some(c) = chars.next() else { break };
                    current.push(c);
                    line += usize::from(c == '\n');
                    (depth, last) = match (last, c) {
                        ('*', '/') => (depth - 1, ' '),
                        ('/', '*') => (depth + 1, ' '),
                        _ => (depth, c),
                    };
                }
            }
            None if c == ';' => {
                push(&mut out, &mut current, start_line);
                start_line = line;
            }
            None => current.push(c),
        }
        if current.trim().is_empty() {
            start_line = line;
        }
    }
    push(&mut out, &mut current, start_line);
    out
}

/// `message` with every `Line: n` of a SQL parser error (counted from the statement's first
/// line) turned into the line of the job file, given the statement starts on `first_line`.
pub fn file_lines(message: &str, first_line: usize) -> String {
    let mut parts = message.split("Line: ");
    let mut out = parts.next().unwrap_or_default().to_string();
    for part in parts {
        let digits = part.len() - part.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        out.push_str("Line: ");
        match part[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&format!("{}{}", n + first_line - 1, &part[digits..])),
            Err(_) => out.push_str(part),
        }
    }
    out
}

fn push(out: &mut Vec<(usize, String)>, current: &mut String, line: usize) {
    let s = current.trim();
    if !s.is_empty() {
        out.push((line, s.to_string()));
    }
    current.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_semicolons_outside_quotes_and_comments() {
        let text = "-- intro; not a statement\nSELECT 'a;b';\n\nSELECT 2 -- two; really\n;  ";
        let s = statements(text);
        assert_eq!(
            s,
            vec![
                (2, "SELECT 'a;b'".to_string()),
                (4, "SELECT 2 \n".trim().to_string())
            ]
        );
    }

    #[test]
    fn block_comments_do_not_split_and_parser_lines_count_in_the_file() {
        let s = statements("SELECT 1 /* a; b\n */ + 1;\nSELECT 2;");
        assert_eq!(s.len(), 2, "{s:?}");
        let nested = statements("SELECT 1 /* a /* b; */ c; */ + 1; SELECT /*/ ; */ 2;");
        assert_eq!(nested.len(), 2, "{nested:?}");
        assert_eq!(s[1].0, 3);
        assert_eq!(
            file_lines("Expected: x, found: y at Line: 2, Column: 7", 10),
            "Expected: x, found: y at Line: 11, Column: 7"
        );
    }

    #[test]
    fn substitutes_variables_and_names_unknown_ones() {
        let vars = HashMap::from([("data".to_string(), "/d".to_string())]);
        assert_eq!(
            substitute("x '${data}/a.csv'", &vars).unwrap(),
            "x '/d/a.csv'"
        );
        let err = substitute("${rows}", &vars).unwrap_err();
        assert!(err.to_string().contains("${rows}"), "{err}");
    }

    #[test]
    fn a_value_never_adds_sql_of_its_own() {
        let evil = "x' AS a; SELECT 'injected' AS z; --";
        let vars = HashMap::from([
            ("v".to_string(), evil.to_string()),
            ("n".to_string(), "10".to_string()),
        ]);
        let text = substitute("SELECT '${v}' AS v, \"${v}\" LIMIT ${n}", &vars).unwrap();
        assert_eq!(statements(&text).len(), 1, "{text}");
        assert!(text.starts_with("SELECT 'x'' AS a; SELECT ''injected'' AS z; --' AS v"));
        // Outside quotes, only a plain word; the error names the variable.
        let err = substitute("SELECT ${v}", &vars).unwrap_err().to_string();
        assert!(
            err.contains("--var v=") && err.contains("outside quotes"),
            "{err}"
        );
        for plain in ["10", "1e-3", "s3://b/k.csv", "a_b"] {
            let vars = HashMap::from([("p".to_string(), plain.to_string())]);
            assert_eq!(
                substitute("LIMIT ${p}", &vars).unwrap(),
                format!("LIMIT {plain}")
            );
        }
        for bad in ["1; DROP", "1 --", "", "a b", "x/*"] {
            let vars = HashMap::from([("p".to_string(), bad.to_string())]);
            assert!(substitute("LIMIT ${p}", &vars).is_err(), "{bad}");
        }
        // The context is read past comments and earlier strings.
        let text = "-- it's\nSELECT 'a' || '${v}' /* ' */";
        let out = substitute(text, &vars).unwrap();
        assert_eq!(statements(&out).len(), 1, "{out}");
    }
}
