-- A topic model of raw text: documents split into words in SQL, the vocabulary numbered by the
-- PS counter, LDA trained by collapsed Gibbs sampling under model rotation (Harp's), saved,
-- each topic's top words read back by name, and new documents' topic mixtures inferred.
--   angel-ps run examples/lda/job.sql --var out=/tmp/topics
-- (from the repository root). `data` is a directory holding `documents.csv` with a header
-- `doc,text`; the default is 48 short documents written for this repository about three
-- subjects. Variables: topics (3), epochs (200), workers (2), parallelism (rotation).

CREATE TABLE docs AS SELECT doc, text FROM read_csv('${data:-examples/data/lda}/documents.csv');

-- Number the words used at least twice (stop words and words under 3 letters dropped).
SELECT ps_counter_add('topic_words', ps_tokens(text, 'min_length=3, stop_words=english')) AS counted
  FROM docs;
SELECT ps_counter_seal('topic_words', 2) AS words;

-- A document's words as indices, repeats kept (a word used twice is two tokens).
CREATE TABLE corpus AS SELECT doc,
  ps_index('topic_words', ps_tokens(text, 'min_length=3, stop_words=english')) AS words
  FROM docs;

CREATE OR REPLACE MODEL topics OPTIONS (
  kind = 'lda', topics = ${topics:-3}, counter = 'topic_words', alpha = 0.1, beta = 0.01,
  parallelism = '${parallelism:-rotation}', workers = ${workers:-2}, epochs = ${epochs:-200}
) AS SELECT doc, words FROM corpus;

SELECT ps_perplexity('topics', words) AS training_perplexity FROM corpus;

SAVE MODEL topics TO '${out}/topics_model';

-- Each topic's 6 most probable words, by name.
SELECT topic, array_agg(feature ORDER BY place) AS top_words FROM (
  SELECT topic, feature,
    row_number() OVER (PARTITION BY topic ORDER BY word_probability DESC, feature) AS place
  FROM read_model('${out}/topics_model'))
WHERE place <= 6 GROUP BY topic ORDER BY topic;

-- Documents the model never saw: each one's topic mixture, with the words unknown to the
-- vocabulary dropped by ps_index.
CREATE TABLE new_docs AS SELECT * FROM (VALUES
  (101, 'The astronauts saw the planet and its moon through the telescope in orbit.'),
  (102, 'Bake the dough in the oven with butter and sugar and serve the bread warm.'),
  (103, 'The striker scored a penalty and the fans sang as the team won the match.')
) AS t(doc, text);
SELECT doc, ps_topics('topics',
    ps_index('topic_words', ps_tokens(text, 'min_length=3, stop_words=english'))) AS mixture
  FROM new_docs ORDER BY doc;
