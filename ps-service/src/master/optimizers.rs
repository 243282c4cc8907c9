//! The optimizers the servers run, as the master knows them: each server reports its own when
//! it registers, the partition map lists those every server runs, and a model matrix is
//! checked against them. So an optimizer's state layout is defined once, by its
//! implementation on the servers, and a user-registered optimizer needs no change elsewhere.

use std::collections::BTreeMap;

use angel_proto::{CreateMatrixRequest, OptimizerInfo, PsError, Result};

/// Refuses a joining server whose optimizer of some name keeps another number of state rows
/// than a registered server's of the same name: a model could not be laid out for both.
pub fn check_joining<'a>(
    addr: &str,
    offered: &[OptimizerInfo],
    registered: impl Iterator<Item = (&'a str, &'a [OptimizerInfo])>,
) -> Result<()> {
    for (other, theirs) in registered {
        for mine in offered {
            if let Some(t) = theirs.iter().find(|t| t.name == mine.name)
                && t.state_rows != mine.state_rows
            {
                return Err(PsError::WrongState(format!(
                    "server {addr}: optimizer '{}' keeps {} state rows, but server {other}'s \
                     keeps {}; every server must run the same optimizers",
                    mine.name, mine.state_rows, t.state_rows
                )));
            }
        }
    }
    Ok(())
}

/// The optimizers every one of `servers` runs, by name.
pub fn common<'a>(mut servers: impl Iterator<Item = &'a [OptimizerInfo]>) -> Vec<OptimizerInfo> {
    let Some(first) = servers.next() else {
        return Vec::new();
    };
    let mut all: BTreeMap<&str, &OptimizerInfo> =
        first.iter().map(|o| (o.name.as_str(), o)).collect();
    for theirs in servers {
        all.retain(|name, _| theirs.iter().any(|t| t.name == *name));
    }
    all.into_values().cloned().collect()
}

/// Checks a matrix that names an optimizer (a model) has the rows that optimizer needs: one
/// group of weights and state rows per output (one output for a linear model, one per class
/// for softmax).
pub fn check_model(request: &CreateMatrixRequest, known: &[OptimizerInfo]) -> Result<()> {
    let Some(params) = request.training.as_ref().and_then(|t| t.optimizer.as_ref()) else {
        return Ok(());
    };
    let name = &params.name;
    let Some(info) = known.iter().find(|o| &o.name == name) else {
        let names: Vec<&str> = known.iter().map(|o| o.name.as_str()).collect();
        return Err(PsError::NotFound(format!(
            "model '{}': no optimizer named '{name}' runs on every server (available: {})",
            request.name,
            names.join(", ")
        )));
    };
    let group = 1 + u64::from(info.state_rows);
    if request.rows == 0 || !request.rows.is_multiple_of(group) {
        return Err(PsError::InvalidArgument(format!(
            "model '{}': optimizer '{name}' needs {group} rows per output (weights and {} of \
             state), the matrix has {}",
            request.name, info.state_rows, request.rows
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, state_rows: u32) -> OptimizerInfo {
        OptimizerInfo {
            name: name.into(),
            state_rows,
        }
    }

    #[test]
    fn servers_must_agree_and_only_shared_optimizers_are_listed() {
        let a = [info("sgd", 0), info("adam", 2)];
        let b = [info("adam", 2), info("mine", 3)];
        assert_eq!(common([&a[..], &b[..]].into_iter()), vec![info("adam", 2)]);
        assert!(check_joining("b", &b, [("a", &a[..])].into_iter()).is_ok());
        let clash = [info("adam", 1)];
        let err = check_joining("c", &clash, [("a", &a[..])].into_iter()).unwrap_err();
        assert!(
            err.to_string().contains("optimizer 'adam' keeps 1"),
            "{err}"
        );
    }

    #[test]
    fn a_model_matrix_has_the_rows_of_its_optimizer() {
        let known = vec![info("adam", 2)];
        let mut r = CreateMatrixRequest {
            name: "m".into(),
            rows: 3,
            ..Default::default()
        };
        assert!(check_model(&r, &known).is_ok(), "no optimizer");
        let optimizer = |name| {
            Some(angel_proto::Training::for_optimizer(
                angel_proto::optimizer_params(name, 0.1),
            ))
        };
        r.training = optimizer("adam");
        assert!(check_model(&r, &known).is_ok());
        r.rows = 9;
        assert!(check_model(&r, &known).is_ok(), "three outputs");
        r.rows = 2;
        assert!(check_model(&r, &known).is_err());
        r.training = optimizer("rmsprop");
        let err = check_model(&r, &known).unwrap_err().to_string();
        assert!(err.contains("'rmsprop'") && err.contains("adam"), "{err}");
    }
}
