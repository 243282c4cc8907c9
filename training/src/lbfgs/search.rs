//! [`LineSearch`]: backtracking along a descent direction until the objective falls enough
//! (Armijo's sufficient decrease, `f(x_t) <= f(x) + c1 g.(x_t - x)`, which is `c1 t g.d`
//! unless OWL-QN projected the trial point), each trial step one pass of the workers over the
//! data. A failed trial's next step minimises the quadratic through
//! `f(x)`, the slope and the trial (Nocedal and Wright, section 3.5), kept within a tenth and a
//! half of the step that failed.

/// Armijo's constant: any decrease of a thousandth of the slope's promise is enough.
const C1: f64 = 1e-4;
/// Trials before the search gives up: the direction is no descent at the precision the
/// objective is computed to.
const MAX_TRIALS: usize = 20;

/// What to do after a trial.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// The trial step decreased the objective enough: take it.
    Accept,
    /// Try this smaller step.
    Retry(f64),
    /// No step decreased the objective enough.
    Fail,
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct LineSearch {
    f0: f64,
    slope: f64,
    step: f64,
    trials: usize,
}

impl LineSearch {
    /// A search from objective `f0` along a direction of slope `slope` (`g.d`, below 0),
    /// trying `step` first.
    pub fn new(f0: f64, slope: f64, step: f64) -> Self {
        LineSearch {
            f0,
            slope,
            step,
            trials: 0,
        }
    }

    /// The step being tried.
    pub fn step(&self) -> f64 {
        self.step
    }

    /// Trials judged so far.
    pub fn trials(&self) -> usize {
        self.trials
    }

    /// Judges the objective `f` at the step being tried, whose point the gradient's first
    /// order term says moves it by `promised` (`t g.d` on the direction's line).
    pub fn judge(&mut self, f: f64, promised: f64) -> Verdict {
        self.trials += 1;
        let t = self.step;
        if f.is_finite() && f <= self.f0 + C1 * promised {
            return Verdict::Accept;
        }
        if self.trials >= MAX_TRIALS {
            return Verdict::Fail;
        }
        let curvature = f - self.f0 - self.slope * t;
        let quadratic = -self.slope * t * t / (2.0 * curvature);
        self.step = match quadratic.is_finite() {
            true => quadratic.clamp(0.1 * t, 0.5 * t),
            false => 0.5 * t,
        };
        Verdict::Retry(self.step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On `f(t) = (t - 0.1)^2` from `t = 0` along slope -0.2, a first step of 1 overshoots;
    /// the quadratic model's minimiser is then exact, and is accepted.
    #[test]
    fn a_quadratic_is_minimised_by_the_first_interpolation() {
        let f = |t: f64| (t - 0.1).powi(2);
        let mut search = LineSearch::new(f(0.0), -0.2, 1.0);
        let Verdict::Retry(t) = search.judge(f(1.0), -0.2) else {
            panic!("a step of 1 overshoots");
        };
        assert!((t - 0.1).abs() < 1e-12 && t == search.step(), "{t}");
        assert_eq!(search.judge(f(t), -0.2 * t), Verdict::Accept);
        assert_eq!(search.trials(), 2);
    }

    /// A NaN objective halves the step; a direction that never descends fails after the
    /// bounded number of trials.
    #[test]
    fn a_direction_that_never_descends_fails() {
        let mut search = LineSearch::new(1.0, -1.0, 1.0);
        assert_eq!(search.judge(f64::NAN, -1.0), Verdict::Retry(0.5));
        let mut verdict = Verdict::Retry(0.5);
        while let Verdict::Retry(t) = verdict {
            verdict = search.judge(2.0, -t);
        }
        assert_eq!(verdict, Verdict::Fail);
        assert_eq!(search.trials(), MAX_TRIALS);
    }
}
