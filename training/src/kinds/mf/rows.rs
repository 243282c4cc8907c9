//! Reading `(user, item [, rating])` columns as the rows a matrix factorization model trains
//! on: each row's two keys are the user's column `user` and the item's column
//! `users + item`, its label the rating.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int64Type};

use crate::error::{Result, input_err};
use crate::rows::SparseRows;

/// The rows of `users` and `items` id columns with optional `ratings`, for a model of
/// `sizes` (users, items); an error naming the row for a NULL, negative or too large id.
pub fn read(
    function: &str,
    (users, items): (&ArrayRef, &ArrayRef),
    ratings: Option<&ArrayRef>,
    sizes: (u64, u64),
) -> Result<SparseRows> {
    let users = ids(function, "user", users, sizes.0)?;
    let items = ids(function, "item", items, sizes.1)?;
    let keys = users
        .iter()
        .zip(&items)
        .flat_map(|(&u, &i)| [u, sizes.0 + i])
        .collect();
    SparseRows::from_keys(function, keys, 2, ratings)
}

/// The ids of column `role` as numbers below `size`.
fn ids(function: &str, role: &str, column: &ArrayRef, size: u64) -> Result<Vec<u64>> {
    let Ok(column) = cast(column, &DataType::Int64) else {
        return input_err(format!(
            "{function}: the {role} must be an integer id, got {}",
            column.data_type()
        ));
    };
    let column = column.as_primitive::<Int64Type>();
    let mut ids = Vec::with_capacity(column.len());
    for r in 0..column.len() {
        let id = column.is_valid(r).then(|| column.value(r));
        match id
            .and_then(|id| u64::try_from(id).ok())
            .filter(|&id| id < size)
        {
            Some(id) => ids.push(id),
            None => {
                let shown = id.map_or("NULL".to_string(), |id| id.to_string());
                return input_err(format!(
                    "{function}: the {role} of row {r} of the batch is {shown}; the model's \
                     {role} ids run from 0 to {} (option {role}s = {size})",
                    size - 1
                ));
            }
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int32Array;

    use super::*;

    #[test]
    fn ids_outside_the_model_are_refused_naming_the_row() {
        let users: ArrayRef = Arc::new(Int32Array::from(vec![Some(1), Some(7)]));
        let items: ArrayRef = Arc::new(Int32Array::from(vec![Some(0), None]));
        let err = read("f", (&users, &items), None, (10, 3))
            .unwrap_err()
            .to_string();
        assert!(err.contains("item of row 1 of the batch is NULL"), "{err}");
        let err = read("f", (&items, &users), None, (3, 5))
            .unwrap_err()
            .to_string();
        assert!(err.contains("user of row 1"), "{err}");
        let users: ArrayRef = Arc::new(Int32Array::from(vec![1, -2]));
        let err = read("f", (&users, &users), None, (10, 10))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is -2") && err.contains("from 0 to 9"),
            "{err}"
        );
        let ok = read(
            "f",
            (&users.slice(0, 1), &users.slice(0, 1)),
            None,
            (10, 10),
        )
        .unwrap();
        assert_eq!(ok.len(), 1);
    }
}
