//! The calls a client makes to the master: matrices (create, drop, describe, look up),
//! optimizers, status, clocks, epoch reports and jobs' runs, each retried while the master
//! restarts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use angel_proto::credential::AuthChannel;
use angel_proto::master_client::MasterClient;
use angel_proto::{
    ClockReply, ClockRequest, DescribeMatrixRequest, DropMatrixRequest, EpochReport, JobReply,
    JobRequest, OptimizerInfo, PsError, Result, RotatePhase, RotateReply, RotateRequest,
    StatusReply, StatusRequest, TrainedRowsReport,
};

use angel_proto::namespace;
use angel_proto::tls::CA_VAR;

use super::PsClient;
use crate::MatrixSpec;
use crate::matrix::Matrix;
use crate::routes::Routing;

/// How long a call to the master keeps retrying while the master is unreachable (a restart).
pub const MASTER_WAIT: Duration = Duration::from_secs(60);

impl PsClient {
    pub(crate) fn master_error(&self, status: tonic::Status) -> PsError {
        PsError::from_status(status, &format!("master {}", self.master_addr))
    }

    /// Calls the master with `request`, retrying with back-off while it answers UNAVAILABLE
    /// (restarting, or waiting for its servers to register again) for up to [`MASTER_WAIT`].
    pub(crate) async fn on_master<R, T, Fut>(
        &self,
        request: R,
        call: impl Fn(MasterClient<AuthChannel>, R) -> Fut,
    ) -> Result<T>
    where
        R: Clone,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        let deadline = Instant::now() + MASTER_WAIT;
        let mut wait = Duration::from_millis(50);
        loop {
            match call(self.master.clone(), request.clone()).await {
                Ok(reply) => return Ok(reply.into_inner()),
                Err(status) => match self.master_error(status) {
                    PsError::Unavailable(why) if Instant::now() < deadline => {
                        tracing::debug!(%why, "master unavailable; retrying");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(1));
                    }
                    PsError::Unavailable(why) => {
                        return Err(PsError::Unavailable(why + &self.tls_hint()));
                    }
                    e => return Err(e),
                },
            }
        }
    }

    /// What to say after "unreachable" when this client speaks plain HTTP/2: the service may
    /// serve TLS.
    fn tls_hint(&self) -> String {
        match self.config.trust {
            Some(_) => String::new(),
            None => format!(" (if the service serves TLS, set {CA_VAR} or --tls-ca to its CA)"),
        }
    }

    /// Creates a matrix; fails with ALREADY_EXISTS if the name is taken.
    pub async fn create_matrix(&self, spec: MatrixSpec) -> Result<Arc<Matrix>> {
        let spec = MatrixSpec {
            name: self.qualify(&spec.name),
            ..spec
        };
        self.on_master(spec.to_request(), |mut m, r| async move {
            m.create_matrix(r).await
        })
        .await?;
        self.refresh().await?;
        self.matrix(&spec.name).await
    }

    /// Drops a matrix and frees its partitions.
    pub async fn drop_matrix(&self, name: &str) -> Result<()> {
        self.on_master(
            DropMatrixRequest {
                name: self.qualify(name),
            },
            |mut m, r| async move { m.drop_matrix(r).await },
        )
        .await?;
        self.refresh().await
    }

    /// Drops a matrix if there is one of that name (a statement replacing what an earlier
    /// one left).
    pub async fn drop_matrix_if_any(&self, name: &str) -> Result<()> {
        match self.drop_matrix(name).await {
            Ok(()) | Err(PsError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Asks the master for a matrix's current metadata.
    pub async fn describe(&self, name: &str) -> Result<Matrix> {
        let meta = self
            .on_master(
                DescribeMatrixRequest {
                    name: self.qualify(name),
                },
                |mut m, r| async move { m.describe_matrix(r).await },
            )
            .await?;
        Matrix::new(meta)
    }

    /// The matrix named `name` from the cached map, refreshing once if it is not there.
    pub async fn matrix(&self, name: &str) -> Result<Arc<Matrix>> {
        let name = &self.qualify(name);
        if let Some(m) = self.routing.read().by_name.get(name) {
            return Ok(m.clone());
        }
        self.refresh().await?;
        let routing = self.routing.read();
        routing.by_name.get(name).cloned().ok_or_else(|| {
            // Only this namespace's names: other jobs' are none of this one's business.
            let here = Some(self.namespace()).filter(|ns| !ns.is_empty());
            let mine = |n: &&str| namespace::split(n).0 == here;
            let mut known: Vec<&str> = routing
                .by_name
                .keys()
                .map(String::as_str)
                .filter(mine)
                .collect();
            known.sort_unstable();
            PsError::no_matrix(name, &known)
        })
    }

    /// The optimizer `name` as every server runs it, with the rows of state it keeps: a model
    /// trained with it has `1 + state_rows` rows. NOT_FOUND lists the optimizers available.
    pub async fn optimizer(&self, name: &str) -> Result<OptimizerInfo> {
        let find = |routing: &Routing| routing.optimizers.iter().find(|o| o.name == name).cloned();
        if let Some(o) = find(&self.routing.read()) {
            return Ok(o);
        }
        self.refresh().await?;
        let known: Vec<String> = {
            let routing = self.routing.read();
            if let Some(o) = find(&routing) {
                return Ok(o);
            }
            routing.optimizers.iter().map(|o| o.name.clone()).collect()
        };
        if known.is_empty() {
            // No server answers for any optimizer: say why, rather than list none.
            let status = self.status().await?;
            return Err(match status.doubt.is_empty() {
                false => PsError::WrongState(format!(
                    "no server runs optimizer '{name}' for this client: the master refuses \
                     changes ({})",
                    status.doubt
                )),
                true => PsError::Unavailable(format!(
                    "no server runs optimizer '{name}': none has registered with the master at \
                     {} yet",
                    self.master_addr
                )),
            });
        }
        Err(PsError::NotFound(format!(
            "no optimizer named '{name}' runs on every server (available: {})",
            known.join(", ")
        )))
    }

    /// Servers, matrices and partition sizes, as the master sees them.
    pub async fn status(&self) -> Result<StatusReply> {
        self.status_with(StatusRequest::default()).await
    }

    /// [`PsClient::status`], asking for more (each server's record of training pulls).
    pub async fn status_with(&self, request: StatusRequest) -> Result<StatusReply> {
        self.on_master(request, |mut m, r| async move { m.status(r).await })
            .await
    }

    /// A training worker's clock report (see [`ClockRequest`]): returns when the model's
    /// consistency model lets the worker go on.
    pub async fn clock(&self, request: ClockRequest) -> Result<ClockReply> {
        let request = ClockRequest {
            model: self.qualify(&request.model),
            ..request
        };
        self.until_ready(
            request,
            |r: &ClockReply| r.ready,
            |mut m, r| async move { m.clock(r).await },
        )
        .await
    }

    /// A rotating model's worker joins its round, acquires or hands back a slice, or leaves
    /// (see [`RotateRequest`]); an acquisition returns when the slice is granted. Only an
    /// acquisition is asked again: a join answered not ready means the worker's round is over.
    pub async fn rotate(&self, request: RotateRequest) -> Result<RotateReply> {
        let request = RotateRequest {
            model: self.qualify(&request.model),
            ..request
        };
        let acquire = request.phase() == RotatePhase::Acquire;
        self.until_ready(
            request,
            |r: &RotateReply| r.ready || !acquire,
            |mut m, r| async move { m.rotate(r).await },
        )
        .await
    }

    /// Calls the master with `request` until its reply is `ready`: the master bounds each
    /// wait (so no call outlives a connection's timeouts), and this asks again.
    async fn until_ready<R, T, Fut>(
        &self,
        request: R,
        ready: impl Fn(&T) -> bool,
        call: impl Fn(MasterClient<AuthChannel>, R) -> Fut,
    ) -> Result<T>
    where
        R: Clone,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        loop {
            let reply = self.on_master(request.clone(), &call).await?;
            if ready(&reply) {
                return Ok(reply);
            }
        }
    }

    /// Adds `rows` rows of `model` trained (their losses summing to `loss`) to the master's
    /// totals, and returns the totals (rows, summed loss); `rows` 0 only reads them.
    pub async fn report_trained_rows(
        &self,
        model: &str,
        rows: u64,
        loss: f64,
    ) -> Result<(u64, f64)> {
        let report = TrainedRowsReport {
            model: self.qualify(model),
            rows,
            loss,
        };
        let reply = self
            .on_master(
                report,
                |mut m, r| async move { m.report_trained_rows(r).await },
            )
            .await?;
        Ok((reply.rows, reply.loss))
    }

    /// A job run's call to the master (start, renew, progress, end: see
    /// [`angel_proto::JobPhase`]), its job named in this client's namespace.
    pub async fn job(&self, request: JobRequest) -> Result<JobReply> {
        let request = JobRequest {
            job: self.qualify(&request.job),
            ..request
        };
        self.on_master(request, |mut m, r| async move { m.job(r).await })
            .await
    }

    /// Tells the master a model finished an epoch, for the curves of its status page.
    pub async fn report_epoch(&self, report: EpochReport) -> Result<()> {
        let report = EpochReport {
            model: self.qualify(&report.model),
            ..report
        };
        self.on_master(report, |mut m, r| async move { m.report_epoch(r).await })
            .await
            .map(drop)
    }
}
