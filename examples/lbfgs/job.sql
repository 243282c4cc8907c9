-- Full-batch logistic regression on the LIBSVM a9a split by L-BFGS, and by OWL-QN with an L1
-- penalty, both on the PS: the weights and the solver's history live on the servers, each
-- iteration is one pass of the workers summing their rows' gradient (two or more when the
-- line search backtracks), and the direction is computed there by PS functions.
--   angel-ps run examples/lbfgs/job.sql        (from the repository root; --var data=DIR for others)
-- Variables: data (examples/data/a9a), iterations (100), l2 (0.0001), l1 (0.0005).

CREATE TABLE train AS SELECT label, idx, val FROM read_libsvm('${data:-examples/data/a9a}/a9a_train.libsvm.gz');
CREATE TABLE test AS SELECT label, idx, val FROM read_libsvm('${data:-examples/data/a9a}/a9a_test.libsvm.gz');

-- L-BFGS on the mean log loss plus l2/2 |w|^2 (the intercept unpenalised, as scikit-learn's
-- C = 1 / (l2 rows) and Spark MLlib's regParam = l2): the epoch table has a row per iteration.
CREATE OR REPLACE MODEL a9a_lbfgs OPTIONS (
  kind = 'logistic', dim = 123, optimizer = 'lbfgs', l2 = ${l2:-0.0001}, memory = 10,
  tolerance = 1e-6, epochs = ${iterations:-100}, holdout = 'test'
) AS SELECT label, idx, val FROM train;

-- OWL-QN on the mean log loss plus l1 |w|_1: weights the penalty does not pay for are exactly 0
-- (its epoch table's nonzero_weights).
CREATE OR REPLACE MODEL a9a_owlqn OPTIONS (
  kind = 'logistic', dim = 123, optimizer = 'owlqn', l1 = ${l1:-0.0005},
  tolerance = 1e-6, epochs = ${iterations:-100}, holdout = 'test'
) AS SELECT label, idx, val FROM train;

SELECT ps_auc(label, lbfgs) AS lbfgs_auc, ps_logloss(label, lbfgs) AS lbfgs_logloss,
  ps_auc(label, owlqn) AS owlqn_auc, ps_logloss(label, owlqn) AS owlqn_logloss
FROM (SELECT label, ps_predict('a9a_lbfgs', idx, val) AS lbfgs,
             ps_predict('a9a_owlqn', idx, val) AS owlqn FROM test) AS scored;
