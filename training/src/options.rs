//! [`OptionValue`]: one `key = value` model option being read, so every refusal names the
//! option, the value and what is allowed.

use crate::error::{Result, option_err};

/// See the module documentation.
pub struct OptionValue<'a> {
    /// The option's name, as written.
    pub key: &'a str,
    /// Its value, as written.
    pub value: &'a str,
}

impl<'a> OptionValue<'a> {
    /// Option `key` read from a training description as `value`'s text, so a typed value is
    /// checked (and refused) as `CREATE MODEL` checks the value written.
    pub fn typed(key: &'a str, value: &'a str) -> Self {
        OptionValue { key, value }
    }

    /// The value as a finite number for which `ok` holds; `allowed` says which those are.
    pub fn number(&self, ok: impl Fn(f64) -> bool, allowed: &str) -> Result<f64> {
        match self.value.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && ok(x) => Ok(x),
            _ => self.refuse(allowed),
        }
    }

    /// The value as a whole number in `min..=max`: written as an integer, or in a float form
    /// (`1e6`) that is exact (below 2^53).
    pub fn whole(&self, min: u64, max: u64) -> Result<u64> {
        let text = self.value.trim();
        let exact = |x: f64| x.fract() == 0.0 && (0.0..9.007_199_254_740_992e15).contains(&x);
        let n = text.parse::<u64>().ok().or_else(|| {
            let x = text.parse::<f64>().ok()?;
            exact(x).then_some(x as u64)
        });
        match n {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => self.refuse(&format!("a whole number from {min} to {max}")),
        }
    }

    /// The value (lower case) if it is one of `choices`.
    pub fn one_of<'c>(&self, choices: &[&'c str]) -> Result<&'c str> {
        let v = self.value.trim().to_ascii_lowercase();
        match choices.iter().find(|c| **c == v) {
            Some(c) => Ok(c),
            None => {
                let quoted: Vec<String> = choices.iter().map(|c| format!("'{c}'")).collect();
                let allowed = match quoted.split_last() {
                    Some((last, [])) => last.clone(),
                    Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                    None => "nothing".into(),
                };
                self.refuse(&allowed)
            }
        }
    }

    /// The value parsed as `T` (a compression, say), refused with `T`'s own reason.
    pub fn parsed<T: std::str::FromStr<Err: std::fmt::Display>>(&self) -> Result<T> {
        (self.value.parse()).map_err(|e| crate::error::Error::Option(format!("model option {e}")))
    }

    /// Refuses the value: it must be `allowed`.
    pub fn refuse<T>(&self, allowed: &str) -> Result<T> {
        option_err(format!(
            "model option {} = '{}' is not allowed: it must be {allowed}",
            self.key, self.value
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_option_the_value_and_what_is_allowed() {
        let v = |value| OptionValue { key: "k", value };
        assert_eq!(v("1e6").whole(1, 10_000_000).unwrap(), 1_000_000);
        assert!(v("2.5").whole(1, 9).is_err());
        assert_eq!(v(" ASP ").one_of(&["bsp", "asp"]).unwrap(), "asp");
        let err = v("x").one_of(&["a", "b", "c"]).unwrap_err().to_string();
        assert_eq!(
            err,
            "model option k = 'x' is not allowed: it must be 'a', 'b' or 'c'"
        );
        let err = v("NaN").number(|x| x > 0.0, "above 0").unwrap_err();
        assert!(err.to_string().contains("k = 'NaN'"), "{err}");
    }
}
