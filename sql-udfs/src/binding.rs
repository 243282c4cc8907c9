//! [`Binding`]: what every PS-bound SQL function is bound to: the master of the service it
//! talks to, and the [`Reports`], [`KeyLists`], [`Kept`] rotation workers, topic model
//! workers and boosted model workers of the job that registered it. [`PsBound`] is the base those functions share; [`crate::bound_functions`]
//! lists them once, for registration and for the Ballista codecs, which carry only the master
//! across the network.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use angel_client::PsClient;
use datafusion::common::Result;

use crate::reports::Reports;
use angel_training::key_lists::KeyLists;
use angel_training::kinds::gbdt::worker::Worker as TreeWorker;
use angel_training::kinds::lda::worker::Worker as TopicWorker;
use angel_training::rotation::kept::Kept;

/// A service and the job reporting through it.
#[derive(Debug, Clone, Default)]
pub struct Binding {
    master: String,
    /// The job's namespace: its matrix and counter names are `namespace/name` on the service.
    namespace: String,
    reports: Reports,
    key_lists: KeyLists,
    kept: Kept,
    topic_workers: Kept<TopicWorker>,
    tree_workers: Kept<TreeWorker>,
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
            topic_workers: Kept::default(),
            tree_workers: Kept::default(),
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

    /// What the job's rotation workers keep from round to round of a statement.
    pub fn kept(&self) -> &Kept {
        &self.kept
    }

    /// What the job's topic model workers keep from round to round of a statement: their
    /// documents' topics.
    pub fn topic_workers(&self) -> &Kept<TopicWorker> {
        &self.topic_workers
    }

    /// What the job's boosted model workers keep from round to round of a statement: their
    /// rows' bins, margins and nodes.
    pub fn tree_workers(&self) -> &Kept<TreeWorker> {
        &self.tree_workers
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
