//! Namespaces: a matrix, counter or model named `NAMESPACE/name` belongs to `NAMESPACE`. Jobs
//! sharing a service each name things in their own, and tokens can be limited to some.

use crate::{PsError, Result};

/// Longest namespace.
pub const MAX_LEN: usize = 64;

/// The namespace of a service-wide name and the name within it: `("team", "m")` for
/// `team/m`, `(None, "m")` for a name in none. Split at the first `/`.
pub fn split(name: &str) -> (Option<&str>, &str) {
    match name.split_once('/') {
        Some((namespace, rest)) => (Some(namespace), rest),
        None => (None, name),
    }
}

/// Checks `namespace` (given by `source`, named in the error): 1 to 64 letters, digits, `-`,
/// `_` or `.`.
pub fn check(namespace: &str, source: &str) -> Result<()> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    match !namespace.is_empty() && namespace.len() <= MAX_LEN && namespace.chars().all(allowed) {
        true => Ok(()),
        false => Err(PsError::InvalidArgument(format!(
            "{source}: a namespace has 1 to {MAX_LEN} letters, digits, '-', '_' or '.' (got {} \
             characters)",
            namespace.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_at_the_first_slash_and_namespaces_are_plain() {
        assert_eq!(split("team/m"), (Some("team"), "m"));
        assert_eq!(split("team/a/b"), (Some("team"), "a/b"));
        assert_eq!(split("m"), (None, "m"));
        assert!(check("team-a_1.x", "t").is_ok());
        for bad in ["", "a/b", "a b", &"x".repeat(65)] {
            assert!(check(bad, "--namespace").is_err(), "{bad}");
        }
    }
}
