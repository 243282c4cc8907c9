-- Logistic regression on raw UCI Adult: SQL feature extraction, indexing through the PS
-- distributed counter (no join, no shuffle of rows), training on the PS, a fixed 80/20 split.
--   angel-ps run examples/adult/job.sql      (from the repository root; --var data=DIR for others)

CREATE VIEW adult AS SELECT * FROM read_csv('${data:-examples/data/adult}/adult.data.gz',
  'header=false; nulls=?; bad_rows=skip; columns=age int, workclass string, fnlwgt int,
   education string, education_num int, marital_status string, occupation string,
   relationship string, race string, sex string, capital_gain int, capital_loss int,
   hours_per_week int, native_country string, income string');

-- One row per person: label, categorical col=value features, bucketed numbers, crosses.
-- The holdout is every person whose census weight is a multiple of 5 (about 20%).
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
    'loss=' || CAST(CAST(log2(capital_loss + 1) AS INT) AS VARCHAR),
    'age_x_sex=' || CAST(age / 10 AS VARCHAR) || '&' || sex,
    'edu_x_occ=' || education || '&' || occupation,
    'marital_x_hours=' || marital_status || '&' || CAST(hours_per_week / 10 AS VARCHAR)
  ) AS features
FROM adult;

-- Count features of the training rows on the PS, then seal: indices 0..n-1 for features
-- seen at least twice.
SELECT ps_counter_add('adult_features', features) AS counted FROM people WHERE NOT holdout;
SELECT ps_counter_seal('adult_features', 2) AS dim;

CREATE TABLE train AS SELECT label, ps_index('adult_features', features) AS idx FROM people WHERE NOT holdout;
CREATE TABLE test AS SELECT label, ps_index('adult_features', features) AS idx FROM people WHERE holdout;

CREATE OR REPLACE MODEL adult OPTIONS (
  kind = 'logistic', counter = 'adult_features', optimizer = 'adam', learning_rate = 0.01,
  l2 = 0.0001, batch_size = 128, epochs = 8, holdout = 'test',
  compression = '${compression:-none}', compression_mode = '${compression_mode:-auto}'
) AS SELECT label, idx FROM train;

SELECT ps_auc(label, p) AS holdout_auc, ps_logloss(label, p) AS holdout_logloss
FROM (SELECT label, ps_predict('adult', idx) AS p FROM test) AS scored;

-- The model as Parquet (feature, index, weight) plus JSON metadata, committed as a whole, and
-- back: loaded under another name it predicts exactly as the trained one. `out` may be a URL
-- (s3://bucket/dir, hdfs://...); read_model reads the saved weights back as a table.
SAVE MODEL adult TO '${out}/adult_model';
LOAD MODEL adult_loaded FROM '${out}/adult_model';
CREATE VIEW saved_weights AS SELECT * FROM read_model('${out}/adult_model');
SELECT count(*) AS dictionary FROM saved_weights WHERE feature IS NOT NULL;
SELECT max(abs(ps_predict('adult', idx) - ps_predict('adult_loaded', idx))) AS max_difference FROM test;
