-- The site's queries, one named view each: Python reads `SELECT * FROM site_<name> [WHERE ...] [ORDER BY ...]`
-- and nothing else (leaderboard/site/context.py creates them as TEMP views on the read-only connections at
-- build time; the store's own schema is leaderboard/store/schema.sql). DuckDB binds a view when it is created, so the
-- views are in sections: `-- @section store` on the store, `-- @section labelled` on the store once the
-- relation task_labels (run_id, task, label: peeval.records.task_label) is registered, `-- @section claims` on
-- the claims stage's database when it has a claims table, `-- @section any` on every connection (with the one
-- macro the views share, seed_mean).

-- @section any
CREATE TEMP VIEW site_tables AS SELECT table_name FROM information_schema.tables;
-- a metric's mean over the runs of one name (peeval.records.METRICS seeds = "mean"), added up in run-id order:
-- avg() adds in scan order, so the same runs ingested in another order could change a mean's last bit
-- list_avg sums first: two finite values near the largest double overflow to inf ("inf (2 seeds)"); then the mean
-- is the sum of each value over the count (a +inf among them is kept: a model that explodes)
CREATE TEMP MACRO stable_avg(l) AS CASE WHEN isfinite(list_avg(l)) OR list_bool_or(list_transform(l, e -> NOT isfinite(e)))
    THEN list_avg(l) ELSE list_sum(list_transform(l, e -> e / len(l))) END;
CREATE TEMP MACRO seed_mean(x, run_id) AS stable_avg(list(x ORDER BY run_id) FILTER (WHERE x IS NOT NULL));

-- @section store
-- what each (run, task) read and the (run, task) pairs measured: the inputs of task_labels
CREATE TEMP VIEW site_task_reads AS SELECT run_id, task, source, location FROM task_data;
CREATE TEMP VIEW site_metric_tasks AS SELECT DISTINCT run_id, task FROM metrics;

-- the context length the encodings were pretrained at: the most common one of the pretrain runs
CREATE TEMP VIEW site_training_length AS
SELECT training_length L, count(*) k FROM runs WHERE kind = 'pretrain' AND training_length IS NOT NULL
GROUP BY 1 ORDER BY k DESC, L LIMIT 1;

-- every run's numbers with its name and kind (the leaderboard tables' cells)
CREATE TEMP VIEW site_metric_rows AS
SELECT r.name, r.run_id, r.kind, m.task, m.metric, m.value, m.stderr, m.n
FROM metrics m JOIN runs r USING (run_id) WHERE m.filter = 'none';
CREATE TEMP VIEW site_run_params AS SELECT kind, run_id, protocol, params FROM runs;
-- the rows of each name's position table, for encodings that read positions from one (peeval.perplexity
-- TABLE_ENCODINGS): pe_options max_positions, else the training length (= max_position_embeddings, LearnedPE)
CREATE TEMP VIEW site_position_tables AS
SELECT name, pe, min(coalesce(CAST(json_extract(pe_options, '$.max_positions') AS INTEGER), training_length)) AS rows
FROM runs WHERE pe IS NOT NULL GROUP BY name, pe;
CREATE TEMP VIEW site_name_sources AS SELECT DISTINCT name, source, size, task_setting FROM runs;
CREATE TEMP VIEW site_runs AS SELECT * FROM runs;

-- the budget line: the pretraining scale and the diagnostics' budgets, per source; a run's step-0 control (issue 67)
-- is no encoding and spent no budget
CREATE TEMP VIEW site_pretrain_budget AS
SELECT r.source, e.params, e.steps, e.tokens, r.name, r.seed, r.size
FROM runs r JOIN efficiency e USING (checkpoint) WHERE r.kind = 'pretrain' AND e.task IS NULL
  AND json_extract_string(e.summary, '$.control') IS DISTINCT FROM 'step0';
CREATE TEMP VIEW site_diagnostic_budget AS
SELECT r.source, e.task, min(e.steps) s, min(e.tokens) t, count(DISTINCT r.seed) k,
       string_agg(DISTINCT r.pe, ', ' ORDER BY r.pe) pes
FROM runs r JOIN efficiency e USING (checkpoint) WHERE r.kind = 'diagnostic'
  AND json_extract_string(e.summary, '$.control') IS DISTINCT FROM 'step0' GROUP BY r.source, e.task;

-- the pipeline's own models, its extended rope model included (params.base_train: same tokenizer)
CREATE TEMP VIEW site_here_names AS
SELECT DISTINCT name FROM runs
WHERE kind IN ('pretrain', 'diagnostic') OR json_extract(params, '$.base_train') IS NOT NULL;
CREATE TEMP VIEW site_external_lengths AS
SELECT DISTINCT training_length L FROM runs WHERE kind IN ('adapt', 'external') AND training_length IS NOT NULL;
CREATE TEMP VIEW site_ppl_protocols AS SELECT DISTINCT protocol p FROM ppl_by_length WHERE protocol IS NOT NULL;

-- per-cell views combined over the runs of one name: a metric's mean over seeds, a count's sum
-- (peeval.records.METRICS: ppl, bpb, acc average, seed_mean; tokens, windows and n add up), and the number of runs
-- the task families the store holds runs of (a by-length page without runs is neither built nor in the menu)
CREATE TEMP VIEW site_families AS SELECT DISTINCT family FROM family_length_cells;
CREATE TEMP VIEW site_family_lengths AS
SELECT v.family, r.name, v.task, v.length,
       seed_mean(v.value, v.run_id) AS value, sum(v.n) AS n
FROM family_length_cells v JOIN runs r USING (run_id) GROUP BY ALL;
CREATE TEMP VIEW site_passkey AS
SELECT r.name, v.length, v.depth, seed_mean(v.acc, v.run_id) acc, sum(v.n) n
FROM passkey_cells v JOIN runs r USING (run_id) GROUP BY ALL;
CREATE TEMP VIEW site_diagnostics AS
SELECT r.name, v.task, v.split, v.cell, v.len_a, v.len_b,
       seed_mean(v.acc, v.run_id) acc, sum(v.n) n
FROM diagnostic_cells v JOIN runs r USING (run_id) GROUP BY ALL;

-- training curves with what trained them; the adapted models' base (its summary) and the extended runs' names
CREATE TEMP VIEW site_training_curves AS
SELECT c.*, e.pe, e.pe_options, e.method, e.task FROM training_curves c LEFT JOIN efficiency e USING (checkpoint);
CREATE TEMP VIEW site_adapted_bases AS
SELECT checkpoint, summary FROM efficiency WHERE method IS NOT NULL AND summary IS NOT NULL;
CREATE TEMP VIEW site_extended_names AS
SELECT DISTINCT checkpoint, name FROM runs WHERE json_extract(params, '$.base_train') IS NOT NULL;
CREATE TEMP VIEW site_pretrain_names AS SELECT DISTINCT checkpoint, name, size FROM runs WHERE kind = 'pretrain';
CREATE TEMP VIEW site_efficiency AS
SELECT checkpoint, pe, pe_options, method, task, params, total_params, flops_per_token, tokens_per_s, train_time_s,
       steps, tokens, final_val_loss, final_val_ppl
FROM efficiency;

-- a run added beside a published profile's (make site MINE=...): what its row says under its name (site/index.py)
-- (a checkpoint without a training summary, e.g. Hugging Face's: the size and tokenizer its evaluation recorded)
CREATE TEMP VIEW site_run_scale AS
SELECT r.name, r.source, r.training_length, r.checkpoint, r.results_path,
       coalesce(e.params, try_cast(json_extract_string(r.params, '$.model_params') AS BIGINT)) AS params, e.tokens,
       coalesce(json_extract_string(e.summary, '$.settings.tokenizer'),
                json_extract_string(r.params, '$.tokenizer.name')) AS tokenizer,
       coalesce(json_extract_string(e.summary, '$.settings.vocab_size'),
                json_extract_string(r.params, '$.tokenizer.vocab_size')) AS vocab_size,
       json_extract_string(r.params, '$.tokenizer.hash') AS tokenizer_hash
FROM runs r LEFT JOIN efficiency e ON e.checkpoint = r.checkpoint AND e.task IS NULL AND e.method IS NULL;

-- a run's page: its metrics, its first samples per task (k: the rank by doc_id), the data it read
CREATE TEMP VIEW site_run_metrics AS SELECT run_id, task, metric, filter, value, stderr, n FROM metrics;
CREATE TEMP VIEW site_run_samples AS
SELECT run_id, task, doc_id, prompt, target, response, correct,
       row_number() OVER (PARTITION BY run_id, task ORDER BY doc_id) k
FROM samples;
CREATE TEMP VIEW site_run_data AS
SELECT run_id, task, source, location, config, split, revision, documents, documents_sha256, params FROM task_data;

-- the compare page: runs, per-example outcomes, headline numbers, perplexity blocks
CREATE TEMP VIEW site_compare_runs AS SELECT run_id, name, kind, seed, checkpoint FROM runs;
CREATE TEMP VIEW site_compare_samples AS
SELECT run_id, task, doc_id, prompt, target, response, correct FROM samples WHERE correct IS NOT NULL;
CREATE TEMP VIEW site_compare_metrics AS
SELECT run_id, task, metric, value, stderr FROM metrics WHERE filter = 'none';
CREATE TEMP VIEW site_compare_blocks AS
SELECT run_id, task, doc_id, length, ll, tokens, bytes, protocol, target_start, target_end
FROM ppl_blocks WHERE ll IS NOT NULL AND tokens > 0;

-- @section labelled
-- perplexity per corpus as read (a mirror run and a hub run of one task never combined; peeval_ppl_: PPL_PREFIX)
-- each row with its own training length, size and tokenizer (the one its evaluation recorded, peeval.tokenizer and
-- its hash; else its training summary's kind and size; NULL: not recorded), so runs of one name trained otherwise
-- are never one mean, nor drawn under another's
CREATE TEMP VIEW site_ppl_by_length AS
SELECT r.name, coalesce(l.label, v.corpus) corpus, v.length, seed_mean(v.ppl, v.run_id) ppl,
       seed_mean(v.bpb, v.run_id) bpb, sum(v.tokens) tokens,
       sum(v.windows) windows, count(*) runs, r.training_length, r.size,
       coalesce(json_extract_string(r.params, '$.tokenizer.name') || ' ' ||
                json_extract_string(r.params, '$.tokenizer.vocab_size'), t.tokenizer) tokenizer,
       coalesce(json_extract_string(r.params, '$.tokenizer.hash'), t.tokenizer) tokenizer_hash
FROM ppl_by_length v JOIN runs r USING (run_id)
LEFT JOIN task_labels l ON l.run_id = v.run_id AND l.task = 'peeval_ppl_' || v.corpus
LEFT JOIN (SELECT checkpoint, any_value(json_extract_string(summary, '$.settings.tokenizer') || ' ' ||
                                        json_extract_string(summary, '$.settings.vocab_size')) tokenizer
           FROM efficiency WHERE method IS NULL GROUP BY checkpoint) t ON t.checkpoint = r.checkpoint
GROUP BY ALL;
-- the sizes page (site/ladder.py): every pretrained run's perplexity per corpus and length, with its parameters
CREATE TEMP VIEW site_ladder_ppl AS
SELECT r.source, r.name, r.size, r.pe, r.pe_options, r.run_id, e.params, coalesce(l.label, v.corpus) corpus, v.length, v.ppl,
       v.tokens, CAST(json_extract(e.summary, '$.settings.num_hidden_layers') AS INTEGER) layers,
       CAST(json_extract(e.summary, '$.settings.hidden_size') AS INTEGER) width
FROM ppl_by_length v JOIN runs r USING (run_id) JOIN efficiency e ON e.checkpoint = r.checkpoint
LEFT JOIN task_labels l ON l.run_id = v.run_id AND l.task = 'peeval_ppl_' || v.corpus
WHERE r.kind = 'pretrain' AND e.task IS NULL;
CREATE TEMP VIEW site_loss_by_position AS
SELECT r.name, coalesce(l.label, p.corpus) corpus, p.position, seed_mean(p.nll, p.run_id) nll
FROM loss_by_position p JOIN runs r USING (run_id)
LEFT JOIN task_labels l ON l.run_id = p.run_id AND l.task = 'peeval_ppl_' || p.corpus
WHERE isfinite(p.nll) GROUP BY r.name, coalesce(l.label, p.corpus), p.position;

-- @section claims
-- the claims resting on runs of this store, whatever their verdict (a cell links to it), and each paper's verdicts
CREATE TEMP VIEW site_claims_on_runs AS
SELECT claim_id, task, metric, verdict, run_ids, compared FROM claims
WHERE verdict IN ('reproduced', 'contradicted', 'inconclusive', 'not decidable here');
CREATE TEMP VIEW site_claims_by_paper AS SELECT paper, verdict, coalesce(setting_diff, '') setting_diff FROM claims;
