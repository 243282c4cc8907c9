//! [`Registry`]: server-side extensions (PS functions, optimizers) by the name clients send.
//! An unknown name is NOT_FOUND listing what is registered, so a typo names its fix.

use std::collections::BTreeMap;
use std::sync::Arc;

use angel_proto::{PsError, Result};

/// Items of one kind (`what`, as errors name it) by name.
pub struct Registry<T: ?Sized> {
    what: &'static str,
    items: BTreeMap<String, Arc<T>>,
}

// Derived Clone would ask `T: Clone`; the items are shared, not copied.
impl<T: ?Sized> Clone for Registry<T> {
    fn clone(&self) -> Self {
        Registry {
            what: self.what,
            items: self.items.clone(),
        }
    }
}

impl<T: ?Sized> Registry<T> {
    /// An empty registry of `what` ("PS function", "optimizer").
    pub fn new(what: &'static str) -> Self {
        Registry {
            what,
            items: BTreeMap::new(),
        }
    }

    /// Adds (or replaces) `item` under `name`.
    pub fn insert(&mut self, name: String, item: Arc<T>) {
        self.items.insert(name, item);
    }

    /// The item named `name`, or NOT_FOUND listing what is registered.
    pub fn get(&self, name: &str) -> Result<Arc<T>> {
        self.items.get(name).cloned().ok_or_else(|| {
            let known: Vec<&str> = self.items.keys().map(String::as_str).collect();
            PsError::NotFound(format!(
                "no {} named '{name}' (registered: {})",
                self.what,
                known.join(", ")
            ))
        })
    }

    /// Every item, in name order.
    pub fn items(&self) -> impl Iterator<Item = &Arc<T>> {
        self.items.values()
    }
}
