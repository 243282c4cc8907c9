-- The SQL half of examples/python/torch_fm.py: features of the click logs indexed through the
-- PS counter, the SQL factorization machine the PyTorch one is compared with, and the indexed
-- tables handed to Python. Variables: data, factors, learning_rate, batch_size, epochs.

CREATE TABLE logs AS SELECT * FROM read_csv('${data}', 'header=true; bad_rows=skip; columns=
   id int, label double, i1 int, i2 int, i3 int, i4 int, i5 int, i6 int, i7 int, i8 int, i9 int, i10 int, i11 int, i12 int, i13 int,
   c1 string, c2 string, c3 string, c4 string, c5 string, c6 string, c7 string, c8 string, c9 string, c10 string, c11 string, c12 string, c13 string, c14 string, c15 string, c16 string, c17 string, c18 string, c19 string, c20 string, c21 string, c22 string, c23 string, c24 string, c25 string, c26 string');

CREATE TABLE examples AS SELECT label, id % 10 = 0 AS holdout, make_array(
    ps_feature('i1', ps_bucket(i1, 'log2')), ps_feature('i2', ps_bucket(i2, 'log2')), ps_feature('i3', ps_bucket(i3, 'log2')),
    ps_feature('i4', ps_bucket(i4, 'log2')), ps_feature('i5', ps_bucket(i5, 'log2')), ps_feature('i6', ps_bucket(i6, 'log2')),
    ps_feature('i7', ps_bucket(i7, 'log2')), ps_feature('i8', ps_bucket(i8, 'log2')), ps_feature('i9', ps_bucket(i9, 'log2')),
    ps_feature('i10', ps_bucket(i10, 'log2')), ps_feature('i11', ps_bucket(i11, 'log2')), ps_feature('i12', ps_bucket(i12, 'log2')),
    ps_feature('i13', ps_bucket(i13, 'log2')),
    ps_feature('c1', c1), ps_feature('c2', c2), ps_feature('c3', c3), ps_feature('c4', c4), ps_feature('c5', c5),
    ps_feature('c6', c6), ps_feature('c7', c7), ps_feature('c8', c8), ps_feature('c9', c9), ps_feature('c10', c10),
    ps_feature('c11', c11), ps_feature('c12', c12), ps_feature('c13', c13), ps_feature('c14', c14), ps_feature('c15', c15),
    ps_feature('c16', c16), ps_feature('c17', c17), ps_feature('c18', c18), ps_feature('c19', c19), ps_feature('c20', c20),
    ps_feature('c21', c21), ps_feature('c22', c22), ps_feature('c23', c23), ps_feature('c24', c24), ps_feature('c25', c25),
    ps_feature('c26', c26)
  ) AS features
FROM logs;

SELECT ps_counter_add('features', features) AS counted FROM examples WHERE NOT holdout;
SELECT ps_counter_seal('features', 3) AS dim;
CREATE TABLE train AS SELECT label, ps_index('features', features) AS idx FROM examples WHERE NOT holdout;
CREATE TABLE test AS SELECT label, ps_index('features', features) AS idx FROM examples WHERE holdout;

CREATE OR REPLACE MODEL sql_fm OPTIONS (
  kind = 'fm', factors = ${factors}, counter = 'features', optimizer = 'adam',
  learning_rate = ${learning_rate}, batch_size = ${batch_size}, epochs = ${epochs}, holdout = 'test'
) AS SELECT label, idx FROM train;

SELECT ps_auc(label, p) AS auc, ps_logloss(label, p) AS logloss
FROM (SELECT label, ps_predict('sql_fm', idx) AS p FROM test) AS scored;

SELECT label, idx FROM train;
SELECT label, idx FROM test;
