-- Gradient-boosted trees on raw UCI Adult: numbers as they are and categories through the PS
-- counter, trees grown on the PS (histograms pushed to the servers, splits found there), the
-- holdout scored, each feature's importance, the model saved and loaded, and new people scored.
--   angel-ps run examples/gbdt/job.sql --var out=DIR      (from the repository root)
-- Variables: data (examples/data/adult), trees (100), depth (6), learning_rate (0.1), bins (32).

CREATE VIEW adult AS SELECT * FROM read_csv('${data:-examples/data/adult}/adult.data.gz',
  'header=false; nulls=?; bad_rows=skip; columns=age int, workclass string, fnlwgt int,
   education string, education_num int, marital_status string, occupation string,
   relationship string, race string, sex string, capital_gain int, capital_loss int,
   hours_per_week int, native_country string, income string');

-- Six numeric features by name with their values, then one indicator feature per category
-- (value 1; a missing category is a NULL the counter skips). The holdout is every person whose
-- census weight is a multiple of 5 (about 20%), as in examples/adult.
CREATE TABLE people AS SELECT
  CASE WHEN income LIKE '>50K%' THEN 1.0 ELSE 0.0 END AS label,
  fnlwgt % 5 = 0 AS holdout,
  make_array('age', 'fnlwgt', 'education_num', 'capital_gain', 'capital_loss',
    'hours_per_week', 'workclass=' || trim(workclass), 'education=' || trim(education),
    'marital=' || trim(marital_status), 'occupation=' || trim(occupation),
    'relationship=' || trim(relationship), 'race=' || trim(race), 'sex=' || trim(sex),
    'country=' || trim(native_country)) AS features,
  make_array(CAST(age AS DOUBLE), CAST(fnlwgt AS DOUBLE), CAST(education_num AS DOUBLE),
    CAST(capital_gain AS DOUBLE), CAST(capital_loss AS DOUBLE),
    CAST(hours_per_week AS DOUBLE)) AS numbers
FROM adult;

-- Number the features on the PS; categories seen fewer than twice are left out.
SELECT ps_counter_add('gbdt_features', features) AS counted FROM people WHERE NOT holdout;
SELECT ps_counter_seal('gbdt_features', 2) AS features;

-- Every training person has the six numbers, so they keep the first six indices; the
-- categories the counter knows follow, each of value 1.
CREATE VIEW indexed AS SELECT label, holdout, numbers,
  ps_index('gbdt_features', features) AS idx FROM people;
CREATE TABLE train AS SELECT label, idx, array_concat(numbers,
  array_repeat(1.0, CAST(array_length(idx) - 6 AS BIGINT))) AS val FROM indexed WHERE NOT holdout;
CREATE TABLE test AS SELECT label, idx, array_concat(numbers,
  array_repeat(1.0, CAST(array_length(idx) - 6 AS BIGINT))) AS val FROM indexed WHERE holdout;

-- The epoch table has a row per tree: training and holdout loss, holdout AUC, leaves, seconds.
CREATE OR REPLACE MODEL income OPTIONS (
  kind = 'gbdt', counter = 'gbdt_features', trees = ${trees:-100}, depth = ${depth:-6},
  learning_rate = ${learning_rate:-0.1}, bins = ${bins:-32}, l2 = 1, min_child_weight = 1,
  holdout = 'test'
) AS SELECT label, idx, val FROM train;

SELECT ps_auc(label, p) AS holdout_auc, ps_logloss(label, p) AS holdout_logloss
FROM (SELECT label, ps_predict('income', idx, val) AS p FROM test) AS scored;

-- Saved as Parquet (the trees, each feature's importance) with JSON metadata, and back: the
-- loaded model predicts exactly as the trained one.
SAVE MODEL income TO '${out}/gbdt_model';
LOAD MODEL income_loaded FROM '${out}/gbdt_model';
SELECT max(abs(ps_predict('income', idx, val) - ps_predict('income_loaded', idx, val)))
  AS max_difference FROM test;

-- The features that matter, by their share of the trees' gain, by name through the counter.
SELECT feature, round(gain_share, 4) AS gain_share, splits
FROM read_model('${out}/gbdt_model', 'importance') ORDER BY gain DESC LIMIT 10;

-- The first tree, node by node.
SELECT node, feature, threshold, default_left, left, right, round(value, 4) AS value
FROM read_model('${out}/gbdt_model') WHERE tree = 0 ORDER BY node LIMIT 7;

-- Two new people, scored from raw values by the loaded model (the census weight set to a
-- typical one).
CREATE TABLE new_people AS SELECT * FROM (VALUES
  ('Exec-managerial', 'Married-civ-spouse', 'Husband', 'Masters', 14, 45, 15024, 50),
  ('Other-service', 'Never-married', 'Own-child', 'HS-grad', 9, 22, 0, 20)
) AS t(occupation, marital_status, relationship, education, education_num, age,
       capital_gain, hours_per_week);
CREATE VIEW new_indexed AS SELECT occupation, age, make_array(CAST(age AS DOUBLE), 190000.0,
    CAST(education_num AS DOUBLE), CAST(capital_gain AS DOUBLE), 0.0,
    CAST(hours_per_week AS DOUBLE)) AS numbers,
  ps_index('gbdt_features', make_array('age', 'fnlwgt', 'education_num', 'capital_gain',
    'capital_loss', 'hours_per_week', 'occupation=' || occupation,
    'marital=' || marital_status, 'relationship=' || relationship,
    'education=' || education)) AS idx
FROM new_people;
SELECT occupation, age, round(ps_predict('income_loaded', idx, array_concat(numbers,
  array_repeat(1.0, CAST(array_length(idx) - 6 AS BIGINT)))), 3) AS p_over_50k
FROM new_indexed;
