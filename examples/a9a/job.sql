-- Logistic regression on the LIBSVM a9a split: 123 binary features, already one-hot encoded.
--   angel-ps run examples/a9a/job.sql        (from the repository root; --var data=DIR for others)
-- Published logistic-regression figures on the test split: AUC 0.899, log loss 0.342.

CREATE TABLE train AS SELECT label, idx, val FROM read_libsvm('${data:-examples/data/a9a}/a9a_train.libsvm.gz');
CREATE TABLE test AS SELECT label, idx, val FROM read_libsvm('${data:-examples/data/a9a}/a9a_test.libsvm.gz');

-- Trains on the PS (Adam applied on the servers), evaluating on the test split each epoch.
CREATE OR REPLACE MODEL a9a OPTIONS (
  kind = 'logistic', dim = 123, optimizer = 'adam', learning_rate = 0.01, l2 = 0.0001,
  batch_size = 128, epochs = 10, holdout = 'test',
  compression = '${compression:-none}', compression_mode = '${compression_mode:-auto}'
) AS SELECT label, idx, val FROM train;

SELECT ps_auc(label, p) AS test_auc, ps_logloss(label, p) AS test_logloss
FROM (SELECT label, ps_predict('a9a', idx, val) AS p FROM test) AS scored;
