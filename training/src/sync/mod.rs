//! [`SyncSpec`]: how a model's training workers keep in step — the consistency model (BSP,
//! SSP, ASP) and its clock, the number of workers, the update rule (SGD, model averaging,
//! ConSGD, DynSGD: `angel_optim::rule`), backup workers and when a worker counts as slow.
//! Model options, stored in the model's training description (the wire's [`Sync`], which the
//! master's clock table reads); [`worker`] is one worker's side.

pub mod worker;

use std::fmt;

use angel_client::{Sync, UpdateRule};
use angel_optim::rule;

use crate::error::{Result, option_err};
use crate::options::OptionValue;

/// When a worker may pull.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consistency {
    /// Bulk synchronous: every worker finishes clock c before anyone pulls at c + 1; pushes
    /// of a clock are applied in a fixed order, so a run repeats bit for bit.
    Bsp,
    /// Stale synchronous: a worker at clock c pulls once every other worker reached c - s.
    Ssp(u32),
    /// Asynchronous: nobody waits.
    Asp,
}

/// What a clock counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockUnit {
    /// Mini-batches (or, for model averaging, rounds of `local_steps` mini-batches).
    Batch,
    /// Epochs: each epoch is a statement that ends when every worker finished, so workers
    /// keep in step only there and run asynchronously within the epoch.
    Epoch,
}

/// Model rotation's time control (Harp's): how long a worker trains on a slice before it
/// hands it on, the rest of its rows of that slice training in a later round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepBudget {
    /// Every step trains all its rows.
    None,
    /// A step stops after this many milliseconds.
    Fixed(u32),
    /// The master sets each round's budget from the previous round's lease times.
    Auto,
}

/// A model's consistency options; see the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncSpec {
    pub consistency: Consistency,
    pub clock: ClockUnit,
    /// Training tasks per epoch (resolved by `CREATE MODEL`: the option, or one per core or
    /// slot).
    pub workers: u32,
    pub rule: UpdateRule,
    pub local_steps: u32,
    /// A BSP/SSP clock completes when all but this many workers reached it.
    pub backup_workers: u32,
    /// A worker slower than the median by this factor is flagged.
    pub slow_factor: f64,
    /// Under ASP, a worker pulls its next mini-batch while it computes the current one; that
    /// pull misses the worker's own last update (one step of staleness).
    pub pull_ahead: bool,
    /// Model rotation (`parallelism = 'rotation'`, Harp's): the workers trade slices of the
    /// model's rotated part under exclusive leases instead of pulling per mini-batch.
    pub rotation: bool,
    /// Model rotation's time control (option `step_ms`).
    pub step_budget: StepBudget,
    /// Angel's hybrid parallelism (option `groups`): the workers rotate within this many
    /// groups, which share the model through the PS.
    pub groups: u32,
}

/// The longest step budget: a day.
const MAX_STEP_MS: u32 = 24 * 3600 * 1000;

/// SSP's staleness when `sync = 'ssp'` names none.
const DEFAULT_STALENESS: u32 = 3;
/// The largest staleness and number of local steps.
const MAX_STALENESS: u32 = 1 << 20;
const MAX_LOCAL_STEPS: u32 = 1 << 20;
/// The most workers (and groups) a statement runs.
const MAX_WORKERS: u32 = 4096;
/// What `slow_factor` may be.
const SLOW_FACTOR: (fn(f64) -> bool, &str) = (|f| f > 1.0, "a finite number above 1");

impl Default for SyncSpec {
    /// ASP with plain SGD: what trains fastest on our benchmarks (docs/benchmarks.md).
    fn default() -> Self {
        SyncSpec {
            consistency: Consistency::Asp,
            clock: ClockUnit::Batch,
            workers: 0,
            rule: UpdateRule::Sgd,
            local_steps: 8,
            backup_workers: 0,
            slow_factor: 2.0,
            pull_ahead: false,
            rotation: false,
            step_budget: StepBudget::None,
            groups: 1,
        }
    }
}

impl SyncSpec {
    /// Sets option `key` if it is one of these (returns false otherwise); a bad value is an
    /// error naming the option, the value and what is allowed.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool> {
        let option = OptionValue { key, value };
        let whole = |min: u32, max: u32| {
            option
                .whole(u64::from(min), u64::from(max))
                .map(|n| n as u32)
        };
        match key {
            "sync" => {
                self.consistency = match (option.one_of(&["bsp", "ssp", "asp"])?, self.consistency)
                {
                    ("bsp", _) => Consistency::Bsp,
                    ("ssp", Consistency::Ssp(s)) => Consistency::Ssp(s),
                    ("ssp", _) => Consistency::Ssp(DEFAULT_STALENESS),
                    _ => Consistency::Asp,
                }
            }
            "staleness" => {
                self.consistency = match whole(0, MAX_STALENESS)? {
                    0 => Consistency::Bsp,
                    s => Consistency::Ssp(s),
                }
            }
            "clock" => {
                self.clock = match option.one_of(&["batch", "epoch"])? {
                    "batch" => ClockUnit::Batch,
                    _ => ClockUnit::Epoch,
                }
            }
            "workers" => self.workers = whole(1, MAX_WORKERS)?,
            "update" => {
                let name = option.one_of(&rule::NAMES)?;
                self.rule = rule::by_name(name).unwrap_or_default()
            }
            "local_steps" => self.local_steps = whole(1, MAX_LOCAL_STEPS)?,
            "backup_workers" => self.backup_workers = whole(0, MAX_WORKERS - 1)?,
            "slow_factor" => self.slow_factor = option.number(SLOW_FACTOR.0, SLOW_FACTOR.1)?,
            "pull_ahead" => self.pull_ahead = option.one_of(&["true", "false"])? == "true",
            "parallelism" => self.rotation = option.one_of(&["data", "rotation"])? == "rotation",
            "groups" => self.groups = whole(1, MAX_WORKERS)?,
            "step_ms" => {
                self.step_budget = match value.trim().eq_ignore_ascii_case("auto") {
                    true => StepBudget::Auto,
                    false => match whole(0, MAX_STEP_MS) {
                        Ok(0) => StepBudget::None,
                        Ok(ms) => StepBudget::Fixed(ms),
                        Err(_) => option.refuse(&format!(
                            "'auto', or a whole number of milliseconds from 0 (no limit) to \
                             {MAX_STEP_MS}"
                        ))?,
                    },
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Reads the options back from a training description's `sync`, `update` and
    /// `local_steps`, each checked as [`SyncSpec::set`] checks it.
    pub fn from_proto(sync: &Sync, update: i32, local_steps: u32) -> Result<SyncSpec> {
        let whole = |key, n: i64, min: u32, max: u32| {
            let text = n.to_string();
            let n = OptionValue::typed(key, &text).whole(u64::from(min), u64::from(max))?;
            Ok::<_, crate::error::Error>(n as u32)
        };
        let Ok(rule) = UpdateRule::try_from(update) else {
            return OptionValue::typed("update", &update.to_string()).refuse("an update rule");
        };
        let slow = match sync.slow_factor {
            0.0 => 2.0,
            f => OptionValue::typed("slow_factor", &f.to_string())
                .number(SLOW_FACTOR.0, SLOW_FACTOR.1)?,
        };
        Ok(SyncSpec {
            consistency: match sync.staleness {
                0 => Consistency::Bsp,
                s if s < 0 => Consistency::Asp,
                s => Consistency::Ssp(whole("staleness", s, 1, MAX_STALENESS)?),
            },
            clock: match sync.epoch_clock {
                true => ClockUnit::Epoch,
                false => ClockUnit::Batch,
            },
            workers: match sync.workers {
                0 => 0,
                n => whole("workers", n.into(), 1, MAX_WORKERS)?,
            },
            rule,
            local_steps: whole("local_steps", local_steps.into(), 1, MAX_LOCAL_STEPS)?,
            backup_workers: whole(
                "backup_workers",
                sync.backup_workers.into(),
                0,
                MAX_WORKERS - 1,
            )?,
            slow_factor: slow,
            pull_ahead: sync.pull_ahead,
            rotation: sync.rotation_slices > 0,
            step_budget: match sync.rotation_step_ms {
                0 => StepBudget::None,
                ms if ms < 0 => StepBudget::Auto,
                ms => StepBudget::Fixed(whole("step_ms", ms, 1, MAX_STEP_MS)?),
            },
            groups: whole("groups", sync.rotation_groups.max(1).into(), 1, MAX_WORKERS)?,
        })
    }

    /// True when workers pull their next mini-batch while computing the current one.
    pub fn pulls_ahead(&self) -> bool {
        let averages = rule::of(self.rule).averages();
        self.pull_ahead && self.consistency == Consistency::Asp && !averages
    }

    /// Refuses combinations no single option shows: backup workers must leave a worker, and
    /// pulling ahead needs ASP and a rule that pulls every mini-batch.
    pub fn check(&self) -> Result<()> {
        if self.workers > 0 && self.backup_workers >= self.workers {
            return option_err(format!(
                "model option backup_workers = {} must be below workers = {}",
                self.backup_workers, self.workers
            ));
        }
        if self.groups > 1 && !self.rotation {
            return option_err(format!(
                "model option groups = {} is model rotation's hybrid parallelism: it needs \
                 parallelism = 'rotation'",
                self.groups
            ));
        }
        if self.workers > 0 && !self.workers.is_multiple_of(self.groups) {
            return option_err(format!(
                "model option groups = {} must divide workers = {} (each group rotates among \
                 as many workers)",
                self.groups, self.workers
            ));
        }
        if self.pull_ahead && !self.pulls_ahead() {
            return option_err(
                "model option pull_ahead = 'true' needs sync = 'asp' and an update rule other \
                 than 'average'",
            );
        }
        Ok(())
    }

    /// The options the master's clock table reads, as the training description holds them.
    pub fn to_proto(&self) -> Sync {
        Sync {
            staleness: match self.consistency {
                Consistency::Bsp => 0,
                Consistency::Ssp(s) => i64::from(s),
                Consistency::Asp => -1,
            },
            epoch_clock: self.clock == ClockUnit::Epoch,
            workers: self.workers,
            backup_workers: self.backup_workers,
            slow_factor: self.slow_factor,
            pull_ahead: self.pull_ahead,
            rotation_slices: match self.rotation {
                true => 2 * (self.workers / self.groups.max(1)).max(1),
                false => 0,
            },
            rotation_groups: self.groups,
            rotation_step_ms: match self.step_budget {
                StepBudget::None => 0,
                StepBudget::Fixed(ms) => i64::from(ms),
                StepBudget::Auto => -1,
            },
        }
    }

    /// What the master's clock table applies: -1 when workers never wait (ASP, or epoch
    /// clocks, which statements already keep in step), else the staleness (0 for BSP).
    pub fn staleness(&self) -> i64 {
        self.to_proto().effective_staleness()
    }
}

/// The options of `sync`, `rule` and `local_steps` as `key = value` text, as `CREATE MODEL`
/// takes them: the form a saved model keeps and [`SyncSpec::set`] reads.
pub fn options(sync: &Sync, rule: UpdateRule, local_steps: u32) -> Vec<(&'static str, String)> {
    let (consistency, staleness) = match sync.staleness {
        0 => ("bsp", 0),
        s if s > 0 => ("ssp", s),
        _ => ("asp", 0),
    };
    let clock = match sync.epoch_clock {
        true => ClockUnit::Epoch,
        false => ClockUnit::Batch,
    };
    let mut options = vec![
        ("sync", consistency.to_string()),
        ("clock", clock.to_string()),
        ("update", rule::name(rule).to_string()),
        ("local_steps", local_steps.to_string()),
        ("backup_workers", sync.backup_workers.to_string()),
        ("slow_factor", sync.slow_factor.to_string()),
        ("pull_ahead", sync.pull_ahead.to_string()),
        (
            "parallelism",
            match sync.rotation_slices {
                0 => "data",
                _ => "rotation",
            }
            .to_string(),
        ),
    ];
    if staleness > 0 {
        options.push(("staleness", staleness.to_string()));
    }
    if sync.rotation_groups > 1 {
        options.push(("groups", sync.rotation_groups.to_string()));
    }
    match sync.rotation_step_ms {
        0 => {}
        ms if ms < 0 => options.push(("step_ms", "auto".to_string())),
        ms => options.push(("step_ms", ms.to_string())),
    }
    if sync.workers > 0 {
        options.push(("workers", sync.workers.to_string()));
    }
    options
}

impl fmt::Display for ClockUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClockUnit::Batch => "batch",
            ClockUnit::Epoch => "epoch",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip_and_bad_values_name_the_option() {
        let mut spec = SyncSpec::default();
        for (k, v) in [
            ("sync", "SSP"),
            ("staleness", "2"),
            ("workers", "4"),
            ("update", "dynsgd"),
            ("backup_workers", "1"),
            ("clock", "batch"),
            ("pull_ahead", "TRUE"),
            ("parallelism", "rotation"),
            ("step_ms", "Auto"),
            ("groups", "2"),
        ] {
            assert!(spec.set(k, v).unwrap(), "{k}");
        }
        assert_eq!(spec.staleness(), 2);
        let mut back = SyncSpec::default();
        for (k, v) in options(&spec.to_proto(), spec.rule, spec.local_steps) {
            back.set(k, &v).unwrap();
        }
        assert_eq!(back, spec);
        assert!(!spec.set("optimizer", "adam").unwrap());
        for (k, v, allowed) in [
            ("sync", "eventual", "'bsp', 'ssp' or 'asp'"),
            ("workers", "0", "from 1 to 4096"),
            ("workers", "5000", "from 1 to 4096"),
            ("local_steps", "0", "from 1 to 1048576"),
            ("staleness", "-1", "whole number"),
            ("update", "adam", "'average'"),
            ("slow_factor", "1", "above 1"),
            ("pull_ahead", "yes", "'true' or 'false'"),
        ] {
            let err = spec.set(k, v).unwrap_err().to_string();
            assert!(
                err.contains(&format!("{k} = '{v}'")) && err.contains(allowed),
                "{err}"
            );
        }
        let mut ahead = SyncSpec::default();
        ahead.set("pull_ahead", "true").unwrap();
        ahead.check().unwrap();
        assert!(ahead.pulls_ahead());
        ahead.set("sync", "bsp").unwrap();
        let err = ahead.check().unwrap_err().to_string();
        assert!(
            err.contains("pull_ahead = 'true' needs sync = 'asp'"),
            "{err}"
        );
        spec.set("backup_workers", "4").unwrap();
        assert!(
            spec.check()
                .unwrap_err()
                .to_string()
                .contains("below workers")
        );
    }

    #[test]
    fn epoch_clocks_and_asp_never_wait() {
        let mut spec = SyncSpec::default();
        assert_eq!(spec.staleness(), -1);
        spec.set("sync", "bsp").unwrap();
        assert_eq!(spec.staleness(), 0);
        spec.set("clock", "epoch").unwrap();
        assert_eq!(spec.staleness(), -1);
    }
}
