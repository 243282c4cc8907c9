//! SGD (`update = 'sgd'`): each mini-batch's gradient goes to the servers' optimizer as it is.

use super::Rule;

/// See the module documentation.
pub struct AsComputed;

impl Rule for AsComputed {}
