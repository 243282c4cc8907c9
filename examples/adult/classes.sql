-- Softmax regression on raw UCI Adult: from the other census columns, which of the 6
-- household relationships (husband, wife, own child, not in family, other relative,
-- unmarried) a person has. The same SQL feature extraction and PS counter as job.sql, a
-- multi-class label, a fixed 80/20 split.
--   angel-ps run examples/adult/classes.sql      (from the repository root; --var data=DIR;
--   --var sync=bsp for a run that gives the same model every time)

CREATE VIEW adult AS SELECT * FROM read_csv('${data:-examples/data/adult}/adult.data.gz',
  'header=false; nulls=?; bad_rows=skip; columns=age int, workclass string, fnlwgt int,
   education string, education_num int, marital_status string, occupation string,
   relationship string, race string, sex string, capital_gain int, capital_loss int,
   hours_per_week int, native_country string, income string');

-- The classes 0..5, in a fixed order.
CREATE TABLE people AS SELECT
  CAST(CASE trim(relationship)
    WHEN 'Husband' THEN 0 WHEN 'Wife' THEN 1 WHEN 'Own-child' THEN 2
    WHEN 'Not-in-family' THEN 3 WHEN 'Other-relative' THEN 4 ELSE 5 END AS DOUBLE) AS label,
  fnlwgt % 5 = 0 AS holdout,
  make_array(
    'workclass=' || workclass, 'education=' || education, 'marital=' || marital_status,
    'occupation=' || occupation, 'race=' || race, 'sex=' || sex,
    'country=' || native_country, 'income=' || income,
    'age=' || CAST(age / 5 AS VARCHAR),
    'hours=' || CAST(hours_per_week / 5 AS VARCHAR),
    'age_x_sex=' || CAST(age / 5 AS VARCHAR) || '&' || sex,
    'marital_x_sex=' || marital_status || '&' || sex
  ) AS features
FROM adult;

SELECT ps_counter_add('relationship_features', features) AS counted FROM people WHERE NOT holdout;
SELECT ps_counter_seal('relationship_features', 2) AS dim;

CREATE TABLE train AS SELECT label, ps_index('relationship_features', features) AS idx FROM people WHERE NOT holdout;
CREATE TABLE test AS SELECT label, ps_index('relationship_features', features) AS idx FROM people WHERE holdout;

-- One row of weights per class on the PS; the epoch table reports holdout cross-entropy and
-- accuracy.
CREATE OR REPLACE MODEL relationship OPTIONS (
  kind = 'softmax', classes = 6, counter = 'relationship_features', optimizer = 'adam',
  learning_rate = 0.01, l2 = 0.0001, batch_size = 128, epochs = 4, holdout = 'test',
  sync = '${sync:-asp}'
) AS SELECT label, idx FROM train;

-- The most likely class and its probability per person, and the confusion of the classes.
SELECT ps_accuracy(label, ps_predict('relationship', idx)) AS holdout_accuracy,
       avg(ps_loss('relationship', label, idx)) AS holdout_cross_entropy
FROM test;
SELECT label, ps_predict('relationship', idx) AS predicted, count(*) AS people
FROM test GROUP BY 1, 2 ORDER BY 1, 2;
SELECT label, array_max(ps_predict_proba('relationship', idx)) AS confidence
FROM test LIMIT 5;
