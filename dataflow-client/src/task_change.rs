//! [`TaskChange`]: a change named by the SQL task that makes it rather than by the process
//! that sends it, so a task run again (its executor died) is recognised: its resent changes
//! carry the same names, and servers refuse those they applied before.

/// One change of a task's pass over its data: `task` is derived from the query and the task's
/// partition (the same when the task runs again), `seq` counts the task's changes from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskChange {
    /// The task's pass; never 0 (0 means "no task" on the wire).
    pub task: u64,
    /// The change's number within the pass.
    pub seq: u64,
}
