//! Running angel-ps jobs and showing what they and a service did, for the `angel-ps` command,
//! the benchmarks, the Python package and the example tests: every option a plain struct (with
//! the feature `flags`, also the command line's flags).
//!
//! # Layout
//!
//! - [`run`]: [`run::RunOptions`] and [`run::run_job`] / [`run::run_text`]: a SQL job file on
//!   embedded DataFusion against an embedded or a running service, or on a Ballista cluster;
//!   its results and summary printed as tables.
//! - [`demo`]: the CTR job on generated click logs, embedded or on a local cluster.
//! - [`status`]: a running service's status as tables ([`status::render`]) or JSON lines.
//! - [`output`]: `--output json`, the JSON lines of results, summaries and tables.
//! - [`client_access`]: the token and CA of a program that calls a running service.

pub mod client_access;
pub mod demo;
pub mod output;
pub mod run;
pub mod status;
