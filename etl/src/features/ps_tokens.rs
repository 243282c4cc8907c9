//! `ps_tokens(text [, options]) -> List<Utf8>`: a text's words, for topic models and bags of
//! words. The text is split on every character that is not a letter or a digit (Unicode's),
//! each word lower-cased, and words shorter than `min_length` characters or among the stop
//! words dropped. Repeated words stay, in order, so `ps_index` of the list gives a document's
//! token indices. NULL for NULL.
//!
//! `options` is a constant `'key=value, ...'`, checked at planning: `min_length` (a whole
//! number from 1, default 1), `stop_words` (`none`, the default, or `english`: the short list
//! of English function words below), `lowercase` (`true`, the default, or `false`).

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, AsArray, ListBuilder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

use super::DOC_SECTION;
use crate::udf_args::{Arg, arity, list_of, return_field};

const TEXT: Arg = Arg::new("ps_tokens", 0, "text");
const OPTIONS: Arg = Arg::new("ps_tokens", 1, "options");

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsTokens {
    signature: Signature,
}

impl Default for PsTokens {
    fn default() -> Self {
        PsTokens {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

/// How a text becomes words.
#[derive(Debug, Clone, PartialEq)]
struct Tokenizer {
    min_length: usize,
    stop_words: Option<&'static HashSet<&'static str>>,
    lowercase: bool,
}

impl Default for Tokenizer {
    fn default() -> Self {
        Tokenizer {
            min_length: 1,
            stop_words: None,
            lowercase: true,
        }
    }
}

impl Tokenizer {
    /// The tokenizer of the options argument (`None`: the call has none).
    fn of(options: Option<Option<&ScalarValue>>) -> Result<Self> {
        let mut tokenizer = Tokenizer::default();
        let Some(options) = options else {
            return Ok(tokenizer);
        };
        let value = OPTIONS.constant(options, "string")?;
        let Some(Some(text)) = value.try_as_str() else {
            return OPTIONS.error("a string 'key=value, ...'", value);
        };
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            tokenizer.set(key.trim(), value.trim())?;
        }
        Ok(tokenizer)
    }

    /// Sets option `key` to `value`.
    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let wrong = |expected: &str| OPTIONS.error(expected, format!("{key}={value}"));
        match key {
            "min_length" => match value.parse::<usize>() {
                Ok(n) if n >= 1 => self.min_length = n,
                _ => return wrong("min_length = a whole number from 1"),
            },
            "stop_words" => match value {
                "none" => self.stop_words = None,
                "english" => self.stop_words = Some(&ENGLISH),
                _ => return wrong("stop_words = none or english"),
            },
            "lowercase" => match value {
                "true" => self.lowercase = true,
                "false" => self.lowercase = false,
                _ => return wrong("lowercase = true or false"),
            },
            _ => return wrong("one of min_length, stop_words, lowercase"),
        }
        Ok(())
    }

    /// The words of `text`, in order.
    fn words<'a>(&'a self, text: &'a str) -> impl Iterator<Item = String> + 'a {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(|w| match self.lowercase {
                true => w.to_lowercase(),
                false => w.to_string(),
            })
            .filter(|w| w.chars().count() >= self.min_length)
            .filter(|w| self.stop_words.is_none_or(|s| !s.contains(w.as_str())))
    }
}

impl ScalarUDFImpl for PsTokens {
    fn name(&self) -> &str {
        "ps_tokens"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(self.name(), "ps_tokens(text [, options])", args, 1..=2)?;
        let mut types = vec![TEXT.string(&args[0])?];
        if let Some(options) = args.get(1) {
            types.push(OPTIONS.string(options)?);
        }
        Ok(types)
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(list_of(DataType::Utf8))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let options = (args.arg_fields.len() > 1).then(|| OPTIONS.literal(&args));
        Tokenizer::of(options)?;
        return_field(self, &args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let options = (args.args.len() > 1).then(|| OPTIONS.scalar(&args));
        let tokenizer = Tokenizer::of(options)?;
        let text = TEXT.array(&args)?;
        let text = text.as_string::<i32>();
        let mut out = ListBuilder::new(StringBuilder::new());
        for r in 0..text.len() {
            if text.is_null(r) {
                out.append(false);
                continue;
            }
            for word in tokenizer.words(text.value(r)) {
                out.values().append_value(word);
            }
            out.append(true);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "A text's words: split on every character that is not a letter or a digit, \
                 lower-cased, without words shorter than min_length or among the stop words. \
                 Repeated words stay, in order. NULL for NULL.",
                "ps_tokens(text [, options])",
            )
            .with_argument("text", "A string.")
            .with_argument(
                "options",
                "A constant 'key=value, ...': min_length (from 1; 1), stop_words (none or \
                 english; none), lowercase (true or false; true).",
            )
            .with_sql_example(
                "SELECT doc, ps_tokens(body, 'min_length=3, stop_words=english') AS words \
                 FROM corpus",
            )
            .build()
        });
        Some(&DOC)
    }
}

/// English function words: articles, pronouns, auxiliaries, prepositions, conjunctions.
static ENGLISH: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    "a about above after again against all am an and any are as at be because been before \
     being below between both but by can could did do does doing down during each few for \
     from further had has have having he her here hers herself him himself his how i if in \
     into is it its itself just me more most my myself no nor not now of off on once only or \
     other our ours ourselves out over own same she should so some such than that the their \
     theirs them themselves then there these they this those through to too under until up \
     very was we were what when where which while who whom why will with would you your \
     yours yourself yourselves"
        .split_whitespace()
        .collect()
});

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, AsArray};

    use crate::features::test_util::{planning_error, query};

    /// The rows of the first column of `sql`'s result, as word lists (`None` for NULL).
    async fn words(sql: &str) -> Vec<Option<Vec<String>>> {
        let batches = query(sql).await.unwrap();
        let list = batches[0].column(0).as_list::<i32>();
        (0..list.len())
            .map(|r| {
                list.is_valid(r).then(|| {
                    let words = list.value(r);
                    let words = words.as_string::<i32>();
                    words.iter().map(|w| w.unwrap().to_string()).collect()
                })
            })
            .collect()
    }

    #[tokio::test]
    async fn splits_on_what_is_not_a_letter_or_digit_and_keeps_repeats() {
        let got = words(
            "SELECT ps_tokens(t) FROM (VALUES ('The cat, the HAT; 2 cats!'), ('Ça va-t-il?'), \
             (NULL), ('')) AS v(t)",
        )
        .await;
        let expected = [
            Some(vec!["the", "cat", "the", "hat", "2", "cats"]),
            Some(vec!["ça", "va", "t", "il"]),
            None,
            Some(vec![]),
        ];
        let expected: Vec<Option<Vec<String>>> = (expected.into_iter())
            .map(|w| w.map(|w| w.into_iter().map(String::from).collect()))
            .collect();
        assert_eq!(got, expected);
    }

    #[tokio::test]
    async fn options_drop_short_words_and_stop_words_or_keep_the_case() {
        let text = "'It is the Cat of a neighbour, in 2024'";
        let got = words(&format!(
            "SELECT ps_tokens({text}, 'min_length=2, stop_words=english')"
        ))
        .await;
        let expected: Vec<String> = ["cat", "neighbour", "2024"].map(String::from).to_vec();
        assert_eq!(got, vec![Some(expected)]);
        let got = words(&format!("SELECT ps_tokens({text}, 'lowercase=false')")).await;
        assert_eq!(got[0].as_ref().unwrap()[..3], ["It", "is", "the"]);
    }

    #[tokio::test]
    async fn bad_options_are_refused_at_planning_naming_them() {
        for (options, says) in [
            (
                "min_length=0",
                "min_length = a whole number from 1, got min_length=0",
            ),
            ("stop_words=french", "stop_words = none or english"),
            (
                "colour=red",
                "one of min_length, stop_words, lowercase, got colour=red",
            ),
        ] {
            let err = planning_error(&format!("SELECT ps_tokens('a b', '{options}')")).await;
            assert!(
                err.contains("ps_tokens: argument 2 (options) must be") && err.contains(says),
                "{options}: {err}"
            );
        }
        let err = planning_error("SELECT ps_tokens(1)").await;
        assert!(err.contains("argument 1 (text) must be a string"), "{err}");
    }
}
