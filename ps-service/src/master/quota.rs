//! Per-namespace quotas: how much of a shared service the names of one namespace
//! (`NAMESPACE/name`) may take, so one team's job, or one hostile token limited to its
//! namespace, cannot starve the others. A create past a quota is refused (RESOURCE_EXHAUSTED,
//! naming the namespace, the quota and its flag) before any server is asked; nothing changes.
//!
//! Names without a namespace are the service token's own (a namespace token cannot name them)
//! and have no quota.

use angel_proto::{CreateMatrixRequest, MatrixMeta, PsError, Result, StorageKind, namespace};

use super::state::State;

/// Bytes of attributes (names and values) one namespace's matrices may carry together: the
/// partition map every client downloads carries them all.
pub const ATTRIBUTE_BYTES: usize = 4 << 20;

/// What one namespace may hold (`--namespace-max-objects`, `--namespace-memory`,
/// `--namespace-max-workers` on the master).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quotas {
    /// Matrices and counters together.
    pub objects: usize,
    /// Bytes of dense partition data of its matrices together (sparse ones grow with pushed
    /// keys and are bounded by each server's memory budget instead).
    pub dense_bytes: u64,
    /// Training workers in the clock tables of its models together.
    pub workers: usize,
    /// The fraction of each server's memory budget its data (dense, sparse, counters,
    /// optimizer state) may take on that server, which refuses a write past it.
    pub memory_share: f64,
}

impl Default for Quotas {
    /// 1,000 objects, 40% of this machine's memory of dense data (half a server's default
    /// budget), 1,024 workers, half of each server's budget.
    fn default() -> Self {
        Quotas {
            objects: 1000,
            dense_bytes: crate::server::default_memory_budget() / 2,
            workers: 1024,
            memory_share: 0.5,
        }
    }
}

/// The namespace of a matrix or counter name (a counter's key space is `counter:NAME`).
pub fn namespace_of(name: &str) -> Option<&str> {
    namespace::split(name.strip_prefix("counter:").unwrap_or(name)).0
}

impl Quotas {
    /// Refuses creating `r` if its namespace would hold more objects, attribute bytes or
    /// dense bytes than allowed.
    pub(super) fn check_create(&self, state: &State, r: &CreateMatrixRequest) -> Result<()> {
        let Some(ns) = namespace_of(&r.name) else {
            return Ok(());
        };
        let ours = |name: &str| namespace_of(name) == Some(ns);
        let matrices: Vec<&MatrixMeta> =
            state.matrices.values().filter(|m| ours(&m.name)).collect();
        let objects = matrices.len() + state.counters.keys().filter(|n| ours(n)).count();
        if objects >= self.objects {
            return Err(exceeded(
                ns,
                &format!(
                    "holds {objects} matrices and counters, its quota (--namespace-max-objects {})",
                    self.objects
                ),
            ));
        }
        let attributes: usize = matrices
            .iter()
            .map(|m| attribute_bytes(&m.attrs, m.training.as_ref()))
            .sum();
        let wanted = attribute_bytes(&r.attrs, r.training.as_ref());
        if attributes.saturating_add(wanted) > ATTRIBUTE_BYTES {
            return Err(exceeded(
                ns,
                &format!(
                    "has matrices with {attributes} bytes of attributes; '{}' adds {wanted}, past \
                 the {ATTRIBUTE_BYTES} bytes a namespace may have",
                    r.name
                ),
            ));
        }
        let dense: u64 = matrices
            .iter()
            .map(|m| dense_bytes(m.rows, m.cols, m.value_type(), m.storage()))
            .fold(0, u64::saturating_add);
        let wanted = dense_bytes(r.rows, r.cols, r.value_type(), r.storage());
        if dense.saturating_add(wanted) > self.dense_bytes {
            return Err(exceeded(
                ns,
                &format!(
                    "has {dense} bytes of dense matrices; '{}' needs {wanted} more, past its quota \
                 (--namespace-memory {}); use sparse storage or drop a model",
                    r.name, self.dense_bytes
                ),
            ));
        }
        Ok(())
    }
}

/// The error of a quota reached by namespace `ns`.
pub fn exceeded(ns: &str, what: &str) -> PsError {
    PsError::TooLarge(format!("namespace '{ns}' {what}"))
}

fn attribute_bytes(
    attributes: &std::collections::HashMap<String, String>,
    training: Option<&angel_proto::Training>,
) -> usize {
    let described = training.map_or(0, prost::Message::encoded_len);
    described
        + attributes
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>()
}

/// Bytes a matrix of this shape takes when dense; 0 when sparse.
fn dense_bytes(rows: u64, cols: u64, value: angel_proto::ValueType, storage: StorageKind) -> u64 {
    match storage {
        StorageKind::Dense => rows
            .saturating_mul(cols)
            .saturating_mul(angel_proto::value::value_size(value) as u64),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use angel_proto::ValueType;

    use super::*;

    fn dense(name: &str, cols: u64) -> CreateMatrixRequest {
        CreateMatrixRequest {
            name: name.into(),
            rows: 1,
            cols,
            value_type: ValueType::F32 as i32,
            storage: StorageKind::Dense as i32,
            ..Default::default()
        }
    }

    /// `state` holding matrix `r` (no partitions: the quota looks at shapes only).
    fn hold(state: &mut State, r: &CreateMatrixRequest) {
        let meta = MatrixMeta {
            name: r.name.clone(),
            rows: r.rows,
            cols: r.cols,
            value_type: r.value_type,
            storage: r.storage,
            attrs: r.attrs.clone(),
            ..Default::default()
        };
        state.matrices.insert(r.name.clone(), meta);
    }

    #[test]
    fn dense_bytes_are_summed_per_namespace_and_names_without_one_are_free() {
        let quotas = Quotas {
            objects: 10,
            dense_bytes: 1000,
            workers: 1,
            memory_share: 1.0,
        };
        let mut state = State::default();
        hold(&mut state, &dense("a/w", 200));
        hold(&mut state, &dense("b/w", 200));
        // 800 bytes held by a, 200 more fit exactly; one more byte's worth does not.
        quotas.check_create(&state, &dense("a/x", 50)).unwrap();
        let err = quotas.check_create(&state, &dense("a/x", 51)).unwrap_err();
        assert!(err.to_string().contains("namespace 'a'"), "{err}");
        assert!(err.to_string().contains("--namespace-memory 1000"), "{err}");
        quotas.check_create(&state, &dense("x", 1 << 30)).unwrap();
    }

    #[test]
    fn objects_count_matrices_and_counters_of_the_namespace() {
        let quotas = Quotas {
            objects: 2,
            dense_bytes: u64::MAX,
            workers: 1,
            memory_share: 1.0,
        };
        let mut state = State::default();
        hold(&mut state, &dense("a/w", 1));
        state.counters.insert("a/c".into(), Default::default());
        let err = quotas
            .check_create(&state, &dense("counter:a/d", 1))
            .unwrap_err();
        assert!(
            err.to_string().contains("holds 2 matrices and counters"),
            "{err}"
        );
        quotas.check_create(&state, &dense("b/w", 1)).unwrap();
    }

    #[test]
    fn attributes_are_capped_per_namespace() {
        let quotas = Quotas::default();
        let mut state = State::default();
        let mut big = dense("a/w", 1);
        big.attrs
            .insert("note".into(), "x".repeat(ATTRIBUTE_BYTES - 10));
        hold(&mut state, &big);
        let mut more = dense("a/v", 1);
        more.attrs.insert("note".into(), "x".repeat(20));
        let err = quotas.check_create(&state, &more).unwrap_err();
        assert!(err.to_string().contains("bytes of attributes"), "{err}");
    }
}
