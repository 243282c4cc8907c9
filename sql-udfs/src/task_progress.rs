//! [`TaskProgress`]: the rows one training task trains, counted in this process's
//! [`Progress`] at once and sent to the PS master, summed per model, at most twice a second,
//! so a job whose tasks run in other processes (Ballista executors) shows their rows on its
//! progress bar while an epoch runs (`job::progress::watch` reads the master's totals).

use std::sync::Arc;
use std::time::{Duration, Instant};

use angel_client::PsClient;
use parking_lot::Mutex;

use crate::reports::Progress;

/// How often a task sends what it trained.
const EVERY: Duration = Duration::from_millis(500);

/// See the module documentation.
#[derive(Debug)]
pub struct TaskProgress {
    local: Arc<Progress>,
    /// Where to send, when the job's client is at hand, and the model's name.
    master: Option<(Arc<PsClient>, String)>,
    /// Rows and summed loss not sent yet, and when the last send went.
    pending: Mutex<(u64, f64, Instant)>,
}

impl TaskProgress {
    /// Progress of a task training `model`, counted in `local` and sent through `client`.
    pub fn new(local: Arc<Progress>, client: Option<Arc<PsClient>>, model: &str) -> Self {
        TaskProgress {
            local,
            master: client.map(|c| (c, model.to_string())),
            pending: Mutex::new((0, 0.0, Instant::now())),
        }
    }

    /// Records `rows` trained rows whose losses sum to `loss`.
    pub fn add(&self, rows: u64, loss: f64) {
        self.local.add(rows, loss);
        let mut pending = self.pending.lock();
        pending.0 += rows;
        pending.1 += loss;
        if pending.2.elapsed() >= EVERY {
            self.send(&mut pending);
        }
    }

    /// Sends what was not sent yet (the task ends).
    pub fn flush(&self) {
        self.send(&mut self.pending.lock());
    }

    fn send(&self, pending: &mut (u64, f64, Instant)) {
        let (rows, loss) = (pending.0, pending.1);
        *pending = (0, 0.0, Instant::now());
        let (Some((client, model)), Ok(runtime)) =
            (&self.master, tokio::runtime::Handle::try_current())
        else {
            return;
        };
        if rows == 0 {
            return;
        }
        let (client, model) = (client.clone(), model.clone());
        // Not waited for: the bar is best effort, and training must not stall on it.
        runtime.spawn(async move {
            if let Err(e) = client.report_trained_rows(&model, rows, loss).await {
                tracing::debug!("trained rows of {model} not reported: {e}");
            }
        });
    }
}

impl Drop for TaskProgress {
    fn drop(&mut self) {
        self.flush();
    }
}
