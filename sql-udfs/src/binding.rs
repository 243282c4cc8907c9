//! [`Binding`]: what every PS-bound SQL function is bound to: the master of the service it
//! talks to, and the [`Reports`], [`KeyLists`] and [`Kept`] workers of the job that
//! registered it. [`PsBound`] is the base those functions share; [`crate::bound_functions`]
//! lists them once, for registration and for the Ballista codecs, which carry only the master
//! across the network.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use angel_client::PsClient;
use datafusion::common::Result;

use angel_training::TaskContext;
use angel_training::kept::Kept;
use angel_training::key_lists::KeyLists;

use crate::reports::Reports;

/// A service and the job reporting through it.
#[derive(Debug, Clone, Default)]
pub struct Binding {
    master: String,
    /// The job's namespace: its matrix and counter names are `namespace/name` on the service.
    namespace: String,
    reports: Reports,
    key_lists: KeyLists,
    kept: Kept,
}

impl Binding {
    /// Functions of a job with `reports`, for the service whose master is at `master`.
    pub fn new(master: &str, reports: Reports) -> Self {
        Binding {
            master: master.to_string(),
            namespace: String::new(),
            reports,
            key_lists: KeyLists::default(),
            kept: Kept::default(),
        }
    }

    /// Functions rebuilt from a plan on a Ballista scheduler or executor: the master came with
    /// the plan; what they report stays in that process.
    pub fn remote(master: &str) -> Self {
        Self::new(master, Reports::default())
    }

    /// The master address; it travels with plans to Ballista executors.
    pub fn master(&self) -> &str {
        &self.master
    }

    /// The same, for the names of `namespace` (empty: names as given); it travels with plans
    /// too.
    pub fn in_namespace(self, namespace: &str) -> Self {
        Binding {
            namespace: namespace.to_string(),
            ..self
        }
    }

    /// The namespace the functions' names are taken in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Where the job's functions report.
    pub fn reports(&self) -> &Reports {
        &self.reports
    }

    /// The training batches the job's `ps_train` keeps across epochs.
    pub fn key_lists(&self) -> &KeyLists {
        &self.key_lists
    }

    /// What the job's workers keep from round to round of a statement (a rotation worker's
    /// blocks, a topic model worker's documents and their topics, ...).
    pub fn kept(&self) -> &Kept {
        &self.kept
    }

    /// What a training task of `function` is lent: the job's key lists and kept workers.
    pub fn task_context(&self, function: &'static str) -> TaskContext {
        TaskContext {
            function,
            key_lists: self.key_lists.clone(),
            kept: self.kept.clone(),
        }
    }

    /// The process-wide client of the service, for the job's namespace.
    pub fn client(&self) -> Result<Arc<PsClient>> {
        crate::bridge::client(&self.master, &self.namespace)
    }
}

// Two functions bound to the same master and namespace compute the same thing; where they
// report does not change a plan, so it takes no part in DataFusion's function equality.
impl PartialEq for Binding {
    fn eq(&self, other: &Self) -> bool {
        (&self.master, &self.namespace) == (&other.master, &other.namespace)
    }
}

impl Eq for Binding {}

impl Hash for Binding {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.master.hash(state);
        self.namespace.hash(state);
    }
}

/// A SQL function that talks to the parameter servers.
pub trait PsBound {
    /// The function bound to `binding`.
    fn bind(binding: Binding) -> Self;
    /// What it is bound to.
    fn binding(&self) -> &Binding;
}
