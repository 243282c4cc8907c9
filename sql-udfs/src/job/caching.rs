//! [`Caching`]: key-list caching of a model's training batches, and keeping its workers from
//! round to round, for as long as a statement holds its rows in memory.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::binding::Binding;

/// Key-list caching of a model's training batches, and keeping its rotation workers from
/// epoch to epoch: on while this lives.
pub(super) struct Caching<'a> {
    binding: &'a Binding,
    model: &'a str,
    /// Batches found cached before the current epoch.
    found: AtomicU64,
}

impl<'a> Caching<'a> {
    pub(super) fn on(binding: &'a Binding, model: &'a str) -> Self {
        binding.key_lists().enable(model);
        binding.kept().enable(model);
        Caching {
            binding,
            model,
            found: Default::default(),
        }
    }

    /// The first epoch filled the cache; after the second, a cache nothing was found in (the
    /// query makes new arrays at every epoch) goes. Returns the batches the epoch found.
    pub(super) fn after_epoch(&self, epoch: usize) -> u64 {
        let lists = self.binding.key_lists();
        let hits = lists.hits(self.model);
        let found = hits - self.found.swap(hits, Ordering::Relaxed);
        match epoch {
            1 => lists.seal(self.model),
            2 if found == 0 => lists.disable(self.model),
            _ => {}
        }
        found
    }
}

impl Drop for Caching<'_> {
    fn drop(&mut self) {
        self.binding.key_lists().disable(self.model);
        self.binding.kept().disable(self.model);
    }
}
