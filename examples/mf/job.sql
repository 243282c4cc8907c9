-- Matrix factorization of ratings whose users and items are any strings: the PS counter
-- numbers them, model rotation trains (Harp's, with time control), the holdout is scored,
-- the model saved, and each user gets the items it did not rate with the highest predicted
-- rating, by name.
--   angel-ps run examples/mf/job.sql --var train=train.csv --var test=test.csv --var out=DIR
-- The files have a header `user,item,rating`; `angel-ps bench mf` writes such a pair of
-- synthetic ratings. Variables: rank (8), epochs (6), workers (2), learning_rate (0.03),
-- step_ms (auto; 0: every epoch trains every rating).

CREATE TABLE train_raw AS SELECT CAST(user AS VARCHAR) AS user, CAST(item AS VARCHAR) AS item,
  rating FROM read_csv('${train}');
CREATE TABLE test_raw AS SELECT CAST(user AS VARCHAR) AS user, CAST(item AS VARCHAR) AS item,
  rating FROM read_csv('${test}');

-- Number the users and items of the training ratings on the PS.
SELECT ps_counter_add('mf_users', user) AS counted FROM train_raw;
SELECT ps_counter_seal('mf_users', 1) AS users;
SELECT ps_counter_add('mf_items', item) AS counted FROM train_raw;
SELECT ps_counter_seal('mf_items', 1) AS items;

CREATE TABLE users AS SELECT DISTINCT user AS name, ps_index('mf_users', user)[1] AS id
  FROM train_raw;
CREATE TABLE items AS SELECT DISTINCT item AS name, ps_index('mf_items', item)[1] AS id
  FROM train_raw;
CREATE TABLE train AS SELECT u.id AS user, i.id AS item, rating
  FROM train_raw JOIN users u ON train_raw.user = u.name JOIN items i ON train_raw.item = i.name;
-- Holdout ratings of users or items the training ratings never saw cannot be scored.
CREATE TABLE test AS SELECT u.id AS user, i.id AS item, rating
  FROM test_raw JOIN users u ON test_raw.user = u.name JOIN items i ON test_raw.item = i.name;

CREATE OR REPLACE MODEL recs OPTIONS (
  kind = 'mf', rank = ${rank:-8}, user_counter = 'mf_users', item_counter = 'mf_items',
  optimizer = 'sgd', learning_rate = ${learning_rate:-0.03}, l2 = 0.02,
  parallelism = 'rotation', step_ms = '${step_ms:-auto}', workers = ${workers:-2},
  epochs = ${epochs:-6}, holdout = 'test'
) AS SELECT user, item, rating FROM train;

SELECT ps_rmse(rating, ps_predict('recs', user, item)) AS holdout_rmse,
  count(*) AS holdout_ratings FROM test;

SAVE MODEL recs TO '${out}';

-- Each user's 5 best items among those it did not rate, by name.
CREATE TABLE top5 AS SELECT user, ps_recommend('recs', user, 5, array_agg(item)) AS items
  FROM train GROUP BY user;
SELECT u.name AS user, i.name AS item, r.place
FROM (SELECT user, unnest(items) AS item, unnest(range(1, 6)) AS place FROM top5) AS r
  JOIN users u ON r.user = u.id JOIN items i ON r.item = i.id
ORDER BY u.name, r.place LIMIT 15;
