-- k-means on raw UCI Adult: people grouped by five numbers (age, years of education, hours
-- worked a week, capital gain and loss, each standardised), then each group's share of
-- incomes above 50K, which the clustering never saw. The centres live on the PS; each
-- iteration of Lloyd's algorithm is one pass of the workers.
--   angel-ps run examples/kmeans/job.sql        (from the repository root)
-- Variables: data (examples/data/adult), k (5), iterations (30).

CREATE VIEW adult AS SELECT * FROM read_csv('${data:-examples/data/adult}/adult.data.gz',
  'header=false; nulls=?; bad_rows=skip; columns=age int, workclass string, fnlwgt int,
   education string, education_num int, marital_status string, occupation string,
   relationship string, race string, sex string, capital_gain int, capital_loss int,
   hours_per_week int, native_country string, income string');

CREATE TABLE stats AS SELECT
  avg(age) AS age_mean, stddev(age) AS age_sd,
  avg(education_num) AS edu_mean, stddev(education_num) AS edu_sd,
  avg(hours_per_week) AS hours_mean, stddev(hours_per_week) AS hours_sd,
  avg(ln(capital_gain + 1)) AS gain_mean, stddev(ln(capital_gain + 1)) AS gain_sd,
  avg(ln(capital_loss + 1)) AS loss_mean, stddev(ln(capital_loss + 1)) AS loss_sd
FROM adult;

-- One row per person: an id (numbered in an order of the raw numbers, so every engine gives a
-- person the same id: k-means++ draws its rows by a hash of the id), the standardised point,
-- and the income kept aside.
CREATE TABLE people AS SELECT
  row_number() OVER (ORDER BY fnlwgt, age, education_num, hours_per_week, capital_gain,
                     capital_loss, workclass, occupation, native_country) AS id,
  make_array((age - age_mean) / age_sd, (education_num - edu_mean) / edu_sd,
             (hours_per_week - hours_mean) / hours_sd,
             (ln(capital_gain + 1) - gain_mean) / gain_sd,
             (ln(capital_loss + 1) - loss_mean) / loss_sd) AS point,
  income LIKE '>50K%' AS rich
FROM adult CROSS JOIN stats;

-- The epoch table: inertia and how far the centres moved, per iteration.
CREATE OR REPLACE MODEL segments OPTIONS (
  kind = 'kmeans', k = ${k:-5}, dim = 5, init = 'k-means++', seed = 7, epochs = ${iterations:-30}
) AS SELECT id, point FROM people;

-- Each group: its size, mean distance to its centre, and share of incomes above 50K.
SELECT ps_predict('segments', point) AS segment, count(*) AS people,
  avg(ps_distance('segments', point)) AS mean_distance,
  avg(CAST(rich AS DOUBLE)) AS share_above_50k
FROM people GROUP BY 1 ORDER BY share_above_50k;
