//! [`Binding`]: what every PS-bound SQL function is bound to: the master of the service it
//! talks to, and the [`Reports`] and [`KeyLists`] of the job that registered it. [`PsBound`] is the base those
//! functions share; [`crate::ps_functions`] lists them once, for registration and for the
//! Ballista codecs, which carry only the master across the network.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use angel_client::PsClient;
use datafusion::common::Result;

use crate::key_lists::KeyLists;
use crate::reports::Reports;

/// A service and the job reporting through it.
#[derive(Debug, Clone, Default)]
pub struct Binding {
    master: String,
    reports: Reports,
    key_lists: KeyLists,
}

impl Binding {
    /// Functions of a job with `reports`, for the service whose master is at `master`.
    pub fn new(master: &str, reports: Reports) -> Self {
        Binding {
            master: master.to_string(),
            reports,
            key_lists: KeyLists::default(),
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

    /// Where the job's functions report.
    pub fn reports(&self) -> &Reports {
        &self.reports
    }

    /// The training batches the job's `ps_train` keeps across epochs.
    pub fn key_lists(&self) -> &KeyLists {
        &self.key_lists
    }

    /// The process-wide client of the service.
    pub fn client(&self) -> Result<Arc<PsClient>> {
        crate::bridge::client(&self.master)
    }
}

// Two functions bound to the same master compute the same thing; where they report does not
// change a plan, so it takes no part in DataFusion's function equality.
impl PartialEq for Binding {
    fn eq(&self, other: &Self) -> bool {
        self.master == other.master
    }
}

impl Eq for Binding {}

impl Hash for Binding {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.master.hash(state);
    }
}

/// A SQL function that talks to the parameter servers.
pub trait PsBound {
    /// The function bound to `binding`.
    fn bind(binding: Binding) -> Self;
    /// What it is bound to.
    fn binding(&self) -> &Binding;
}
