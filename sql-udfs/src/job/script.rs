//! A job file as text: `${name}` variables substituted, then cut into statements at
//! semicolons outside quotes and comments.

use std::collections::HashMap;

use datafusion::common::{Result, plan_err};

/// Replaces every `${name}` with its value, and `${name:-default}` with its value or the
/// default; an unknown name without a default is an error naming it.
pub fn substitute(text: &str, vars: &HashMap<String, String>) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start..].find('}') else {
            return plan_err!("unclosed '${{' in the job file");
        };
        let (name, default) = match rest[start + 2..start + len].split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (&rest[start + 2..start + len], None),
        };
        match vars.get(name).map(String::as_str).or(default) {
            Some(v) => out.push_str(v),
            None => {
                return plan_err!("the job uses ${{{name}}} but no --var {name}=... was given");
            }
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
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
    fn substitutes_variables_and_names_unknown_ones() {
        let vars = HashMap::from([("data".to_string(), "/d".to_string())]);
        assert_eq!(
            substitute("x '${data}/a.csv'", &vars).unwrap(),
            "x '/d/a.csv'"
        );
        let err = substitute("${rows}", &vars).unwrap_err();
        assert!(err.to_string().contains("${rows}"), "{err}");
    }
}
