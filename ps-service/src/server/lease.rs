//! [`Lease`]: how long a server may serve data on its master's last word.
//!
//! A master declares a server dead when it stops answering, and restores its partitions
//! elsewhere. A server that was only frozen (SIGSTOP, a long pause, a network cut) and wakes
//! up must not go on serving its stale copies: pushes it acknowledged would be lost, and its
//! snapshots would overwrite the new owners'. So each heartbeat the master answers renews a
//! lease of half the master's `--server-timeout-secs`, counted from when the heartbeat was
//! sent; past it the server answers no data call and writes no snapshot until the master
//! answers again (UNAVAILABLE: clients retry, and get the new owners' map once the master
//! decides). The master, for its part, waits out the lease of a server that stopped answering
//! before restoring its partitions elsewhere, so the two never both serve a partition.

use std::time::{Duration, Instant};

use angel_proto::{PsError, Result};
use parking_lot::Mutex;

/// See the module documentation. Without a length (not registered yet, or a service built
/// without a master in tests) it never expires.
#[derive(Debug, Default)]
pub struct Lease {
    /// The length, and until when the last renewal lets the server serve.
    state: Mutex<(Duration, Option<Instant>)>,
}

impl Lease {
    /// Sets the lease's length, as the master said at registration.
    pub fn set_length(&self, length: Duration) {
        self.state.lock().0 = length;
    }

    /// The master answered a heartbeat (or registration) sent at `sent`.
    pub fn renew(&self, sent: Instant) {
        let mut state = self.state.lock();
        let until = sent + state.0;
        state.1 = Some(state.1.map_or(until, |u| u.max(until)));
    }

    /// Whether the server may serve data and write snapshots now.
    pub fn valid(&self) -> bool {
        let (length, until) = *self.state.lock();
        length.is_zero() || until.is_some_and(|u| Instant::now() < u)
    }

    /// UNAVAILABLE once the lease ran out, saying why and that a retry will be answered.
    pub fn check(&self) -> Result<()> {
        match self.valid() {
            true => Ok(()),
            false => Err(PsError::Unavailable(format!(
                "this server has not heard from its master for over {:?} (it was frozen or cut \
                 off); its partitions may have been restored elsewhere, so it serves no data \
                 until the master answers it again: retry",
                self.state.lock().0
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_runs_from_the_heartbeat_it_was_renewed_by() {
        let lease = Lease::default();
        assert!(lease.valid(), "no length: never expires");
        lease.set_length(Duration::from_millis(50));
        assert!(!lease.valid(), "registered, never renewed");
        lease.renew(Instant::now());
        assert!(lease.check().is_ok());
        lease.renew(Instant::now() - Duration::from_secs(1));
        assert!(lease.valid(), "an older heartbeat never shortens it");
        std::thread::sleep(Duration::from_millis(60));
        let err = lease.check().unwrap_err();
        assert!(matches!(err, PsError::Unavailable(_)), "{err}");
        assert!(err.to_string().contains("retry"), "{err}");
    }
}
