-- A factorization machine on raw UCI Adult against logistic regression on the same features:
-- categories and bucketed numbers through the PS counter and no hand-made crosses, so what
-- the factorization machine gains is the pairs of features it learns (a factor vector per
-- feature, their dot product per pair). Both train on the PS; the holdout is scored by both.
--   angel-ps run examples/fm/job.sql --var out=DIR      (from the repository root)
-- Variables: data (examples/data/adult), factors (8), epochs (10).

CREATE VIEW adult AS SELECT * FROM read_csv('${data:-examples/data/adult}/adult.data.gz',
  'header=false; nulls=?; bad_rows=skip; columns=age int, workclass string, fnlwgt int,
   education string, education_num int, marital_status string, occupation string,
   relationship string, race string, sex string, capital_gain int, capital_loss int,
   hours_per_week int, native_country string, income string');

-- One row per person: a feature per category and per bucket of each number. The holdout is
-- every person whose census weight is a multiple of 5 (about 20%), as in examples/adult.
CREATE TABLE people AS SELECT
  CASE WHEN income LIKE '>50K%' THEN 1.0 ELSE 0.0 END AS label,
  fnlwgt % 5 = 0 AS holdout,
  make_array(
    'workclass=' || workclass, 'education=' || education, 'marital=' || marital_status,
    'occupation=' || occupation, 'relationship=' || relationship, 'race=' || race,
    'sex=' || sex, 'country=' || native_country,
    'age=' || CAST(age / 5 AS VARCHAR),
    'hours=' || CAST(hours_per_week / 5 AS VARCHAR),
    'edu_num=' || CAST(education_num AS VARCHAR),
    'gain=' || CAST(CAST(log2(capital_gain + 1) AS INT) AS VARCHAR),
    'loss=' || CAST(CAST(log2(capital_loss + 1) AS INT) AS VARCHAR)
  ) AS features
FROM adult;

SELECT ps_counter_add('fm_features', features) AS counted FROM people WHERE NOT holdout;
SELECT ps_counter_seal('fm_features', 2) AS dim;

CREATE TABLE train AS SELECT label, ps_index('fm_features', features) AS idx FROM people WHERE NOT holdout;
CREATE TABLE test AS SELECT label, ps_index('fm_features', features) AS idx FROM people WHERE holdout;

-- The epoch tables: training and holdout log loss and AUC per epoch. Each model at the Adam
-- step that suits it best here (the factors' gradients are larger and noisier).
CREATE OR REPLACE MODEL income_fm OPTIONS (
  kind = 'fm', factors = ${factors:-8}, counter = 'fm_features', optimizer = 'adam',
  learning_rate = 0.003, l2 = 0.0001, batch_size = 128, epochs = ${epochs:-10}, holdout = 'test'
) AS SELECT label, idx FROM train;

CREATE OR REPLACE MODEL income_lr OPTIONS (
  kind = 'logistic', counter = 'fm_features', optimizer = 'adam',
  learning_rate = 0.01, l2 = 0.0001, batch_size = 128, epochs = ${epochs:-10}, holdout = 'test'
) AS SELECT label, idx FROM train;

SELECT ps_auc(label, fm) AS fm_auc, ps_logloss(label, fm) AS fm_logloss,
  ps_auc(label, lr) AS logistic_auc, ps_logloss(label, lr) AS logistic_logloss
FROM (SELECT label, ps_predict('income_fm', idx) AS fm, ps_predict('income_lr', idx) AS lr
      FROM test) AS scored;

-- Saved (each feature's weight at output 0 and its factors at outputs 1 to factors) and
-- loaded back: the loaded model predicts exactly as the trained one.
SAVE MODEL income_fm TO '${out}/fm_model';
LOAD MODEL income_fm_loaded FROM '${out}/fm_model';
SELECT max(abs(ps_predict('income_fm', idx) - ps_predict('income_fm_loaded', idx)))
  AS max_difference FROM test;

-- Which pairs matter: the two features' factor vectors' dot product, for the marital status
-- and relationship categories against sex.
CREATE VIEW factors AS SELECT feature, output, weight FROM read_model('${out}/fm_model')
  WHERE output > 0 AND feature IS NOT NULL;
SELECT a.feature AS first, b.feature AS second, round(sum(a.weight * b.weight), 3) AS interaction
FROM factors a JOIN factors b ON a.output = b.output
WHERE (a.feature LIKE 'marital=%' OR a.feature LIKE 'relationship=%') AND b.feature LIKE 'sex=%'
GROUP BY a.feature, b.feature ORDER BY abs(sum(a.weight * b.weight)) DESC LIMIT 8;
