-- peeval's result store: leaderboard/peeval.duckdb (DuckDB 1.5 storage, readable by the duckdb CLI 1.5).
-- Written only by leaderboard/ingest/ (writer.py), one transaction per ingest, except the claims tables at the end
-- (the claims stage, its own file); every statement is idempotent.
--
-- A *run* is one `peeval eval` results directory (results.json + samples_<task>.jsonl). Its run_id
-- is the first 16 hex digits of the sha256 of results.json: the same file always gets the same id,
-- and re-ingesting it replaces its rows (so ingesting twice gives the same rows).
-- A *checkpoint* is a training or adaptation output directory (train_summary.json + train_curve.csv,
-- or adapt_summary.json), keyed by its path relative to the directory ingest ran from.
--
-- This file is the one list of the store's tables, views and columns (leaderboard.ingest reads its
-- columns from it). An upper-case name in braces is one of peeval.records' names (task prefixes, the
-- diagnostic generators), filled in by leaderboard.store.schema_sql(): the views parse the metric names
-- records defines. The views are the only readers' shapes of `metrics`, never written.

CREATE TABLE IF NOT EXISTS runs (
    run_id               VARCHAR PRIMARY KEY,  -- sha256(results.json)[:16]
    name                 VARCHAR NOT NULL,     -- the leaderboard label: encoding (pe + options), base+method, or model
    kind                 VARCHAR NOT NULL,     -- 'pretrain' | 'diagnostic' | 'adapt' (incl. the base as shipped) | 'external'
    checkpoint           VARCHAR,              -- model_args.pretrained (the adapter dir for kind 'adapt')
    pe                   VARCHAR,              -- the checkpoint's positional encoding
    pe_options           JSON,                 -- its options (JSON object)
    params               JSON,                 -- train_summary.params / adapt_summary, model_args, limit, device, sha256, subtasks (members of a group row)
    seed                 INTEGER,
    git_commit           VARCHAR,
    peeval_version       VARCHAR,
    lm_eval_version      VARCHAR,
    torch_version        VARCHAR,
    transformers_version VARCHAR,
    date                 TIMESTAMP,            -- when `peeval eval` wrote the results (UTC)
    max_length           INTEGER,              -- the evaluation context limit
    training_length      INTEGER,              -- the checkpoint's training / position length
    protocol             VARCHAR,              -- perplexity protocol: 'disjoint windows' or 'sliding, stride S'
    dtype                VARCHAR,
    results_path         VARCHAR,              -- the results.json ingested
    diag_task            VARCHAR,              -- the diagnostic task a diagnostic checkpoint was trained on
    source               VARCHAR NOT NULL DEFAULT '{LOCAL_SOURCE}',  -- 'local' (peeval eval here), 'external' (plain lm_eval) or 'published/<profile>'
    machine              VARCHAR,              -- published runs: the machine SOURCE.json names (NULL: local)
    size                 VARCHAR,              -- a pretrained model's shape when not its profile's ('4x32'; its name ends '[4x32]')
    task_setting         VARCHAR               -- a diagnostic model's generator parameters off its task's defaults ('n_instr=256')
);

-- Every aggregated lm-eval metric, per-cell ones included (ppl@L, acc@L@depth, acc@AxB, ...).
CREATE TABLE IF NOT EXISTS metrics (
    run_id  VARCHAR NOT NULL,
    task    VARCHAR NOT NULL,   -- lm-eval task name
    metric  VARCHAR NOT NULL,   -- lm-eval metric name (before the comma)
    filter  VARCHAR NOT NULL,   -- lm-eval filter name (after the comma), usually 'none'
    value   DOUBLE,             -- may be +inf (an exploding model) or NaN
    stderr  DOUBLE,             -- NULL where lm-eval reports 'N/A'
    n       INTEGER             -- documents behind the value (per cell for '@' metrics when samples exist)
);

-- What each task of a run read (results.json peeval.data, recorded by peeval.data): one row per dataset read.
-- A group's rows are its members'. A (run, task) without a row did not record it (a results.json written
-- before peeval recorded its data, or by plain lm_eval): the site says "data not recorded".
CREATE TABLE IF NOT EXISTS task_data (
    run_id           VARCHAR NOT NULL,
    task             VARCHAR NOT NULL,   -- lm-eval task name
    source           VARCHAR NOT NULL,   -- '{DATA_SOURCES}' (peeval.records.DATA_SOURCES)
    location         VARCHAR NOT NULL,   -- mirror folder relative to the mirror root, hub id, folder, or generator
    config           VARCHAR,            -- the dataset's config (name), if any
    split            VARCHAR,            -- the split loaded (NULL: lm-eval's own tasks, which load every split)
    revision         VARCHAR,            -- hub: the commit read (or the revision asked for); mirror: '<source>@<commit>'
                                         -- a `peeval data` download was fetched from (data lock); NULL otherwise
    documents        BIGINT,             -- documents scored (NULL: not counted, lm-eval's own tasks)
    documents_sha256 VARCHAR,            -- sha256 of those documents in order (peeval.data.documents_sha256)
    params           JSON                -- generated data: the generator's parameters (the task's metadata)
);

-- The per-length and per-cell views: the rows of `metrics` (filter 'none') in the shape the charts read,
-- in the order ingest writes `metrics` (runs as ingested; a run's cells by length, then as lm-eval lists them).
-- peeval_ppl_<corpus>: one row per evaluated context length (the cells ppl@L, bpb@L, tokens@L, windows@L).
CREATE VIEW IF NOT EXISTS ppl_by_length AS
SELECT m.run_id,
       substr(m.task, length('{PPL_PREFIX}') + 1)                                   AS corpus,
       CAST(split_part(m.metric, '@', 2) AS INTEGER)                               AS length,  -- window length L in tokens
       max(m.value) FILTER (WHERE split_part(m.metric, '@', 1) = 'ppl')            AS ppl,     -- token perplexity
       max(m.value) FILTER (WHERE split_part(m.metric, '@', 1) = 'bpb')            AS bpb,     -- bits per byte
       CAST(max(m.value) FILTER (WHERE split_part(m.metric, '@', 1) = 'tokens') AS BIGINT)  AS tokens,  -- scored tokens
       CAST(max(m.value) FILTER (WHERE split_part(m.metric, '@', 1) = 'windows') AS BIGINT) AS windows, -- windows scored
       any_value(r.protocol)                                                       AS protocol
FROM metrics m LEFT JOIN runs r USING (run_id)
WHERE m.filter = 'none' AND starts_with(m.task, '{PPL_PREFIX}') AND regexp_matches(m.metric, '^({PPL_BASES})@[0-9]+$')
GROUP BY m.run_id, corpus, length
ORDER BY min(min(m.rowid)) OVER (PARTITION BY m.run_id), corpus, length;

-- peeval_ppl_<corpus>: the loss by position inside the longest windows (nll_pos@P): mean NLL in nats of the
-- targets predicted from P.. tokens of context, one row per position bucket.
CREATE VIEW IF NOT EXISTS loss_by_position AS
SELECT run_id,
       substr(task, length('{PPL_PREFIX}') + 1)     AS corpus,
       CAST(split_part(metric, '@', 2) AS INTEGER) AS position,  -- first context size of the bucket
       value                                       AS nll        -- nats per token
FROM metrics
WHERE filter = 'none' AND starts_with(task, '{PPL_PREFIX}') AND regexp_matches(metric, '^{POSITION_BASE}@[0-9]+$')
ORDER BY rowid;

-- peeval_passkey: exact-match accuracy per (length, depth) cell (acc@<length>@<depth>); depth 0 = needle right
-- after the intro, 1 = right before the question.
CREATE VIEW IF NOT EXISTS passkey_cells AS
SELECT run_id,
       CAST(CAST(split_part(metric, '@', 2) AS DOUBLE) AS INTEGER) AS length,
       CAST(split_part(metric, '@', 3) AS DOUBLE)                  AS depth,
       value                                                       AS acc,
       n
FROM metrics
WHERE filter = 'none' AND task = '{PASSKEY_TASK}' AND regexp_matches(metric, '^acc@[^@]*@[^@]*$')
ORDER BY rowid;

-- peeval_diag_<task>_<split>: overall accuracy (cell '{ALL_CELL}'), other accuracies under their metric name
-- (flip-flop 'read_acc', 'seq_acc') and per-cell accuracies (acc@<cell>; addition cells 'AxB' also fill
-- len_a / len_b). The task is the longest generator name the task name starts with (else the part before
-- its last underscore; none: the split is 'test').
CREATE VIEW IF NOT EXISTS diagnostic_cells AS
WITH d AS (
    SELECT run_id, metric, value, n, substr(task, length('{DIAG_PREFIX}') + 1) AS rest, rowid AS metric_row,
           min(rowid) OVER (PARTITION BY run_id) AS run_row
    FROM metrics
    WHERE filter = 'none' AND starts_with(task, '{DIAG_PREFIX}')
      AND (regexp_matches(metric, '^acc@.') OR (NOT contains(metric, '@') AND ends_with(metric, 'acc')))
), g AS (
    SELECT *,
           CASE WHEN regexp_matches(rest, '^({DIAG_TASKS})_') THEN regexp_extract(rest, '^({DIAG_TASKS})_', 1)
                WHEN regexp_matches(rest, '^.+_') THEN regexp_extract(rest, '^(.+)_', 1)
                ELSE rest END AS gen,
           CASE WHEN contains(metric, '@') THEN substr(metric, length('acc@') + 1)
                WHEN metric = 'acc' THEN '{ALL_CELL}' ELSE metric END AS cell
    FROM d
)
SELECT run_id,
       gen                                                                   AS task,   -- generator name
       CASE WHEN gen = rest THEN 'test' ELSE substr(rest, length(gen) + 2) END AS split,  -- test or an OOD split
       cell,
       CASE WHEN regexp_matches(cell, '^[0-9]+x[0-9]+$') THEN CAST(split_part(cell, 'x', 1) AS INTEGER) END AS len_a,
       CASE WHEN regexp_matches(cell, '^[0-9]+x[0-9]+$') THEN CAST(split_part(cell, 'x', 2) AS INTEGER) END AS len_b,
       value                                                                 AS acc,
       n
FROM g
ORDER BY run_row, NOT contains(metric, '@'), metric_row;  -- per run: the cells, then the task's accuracies

-- peeval_ppl_<corpus>: one row per (document, length) of a run, from its samples: the sums behind ppl@L, so
-- two encodings, or two lengths, compare document by document on the same targets (the targets protocol
-- scores the same tokens, target_start..target_end of the document in the model's tokens, at every length).
CREATE TABLE IF NOT EXISTS ppl_blocks (
    run_id       VARCHAR NOT NULL,
    task         VARCHAR NOT NULL,
    doc_id       INTEGER NOT NULL,  -- the document (its index in the corpus), not the sample's row
    length       INTEGER NOT NULL,  -- context length L
    ll           DOUBLE,            -- sum of log p over the scored tokens (nats)
    tokens       BIGINT,            -- tokens scored
    bytes        BIGINT,            -- their UTF-8 bytes
    protocol     VARCHAR,           -- 'targets' | 'windows'
    target_start BIGINT,            -- targets protocol: the scored run [target_start, target_end); NULL: windows
    target_end   BIGINT
);

-- train_curve.csv of each checkpoint.
CREATE TABLE IF NOT EXISTS training_curves (
    checkpoint VARCHAR NOT NULL,
    step       INTEGER NOT NULL,
    tokens     BIGINT,
    lr         DOUBLE,
    train_loss DOUBLE,
    val_loss   DOUBLE,              -- NULL at steps without validation
    elapsed_s  DOUBLE,
    val_exact_match DOUBLE          -- a diagnostic's in-distribution exact match at each validation (issue 67);
                                    -- NULL: no validation, text pretraining, or a curve written before the column
);

-- Cost of each checkpoint: train_summary.json (pretraining / diagnostics) or adapt_summary.json.
CREATE TABLE IF NOT EXISTS efficiency (
    checkpoint      VARCHAR PRIMARY KEY,
    pe              VARCHAR,        -- the encoding's name as in runs.pe (rope, learned, ...); NULL for an adapter
    params          BIGINT,         -- parameters (trainable parameters for an adapter)
    flops_per_token DOUBLE,
    tokens_per_s    DOUBLE,
    train_time_s    DOUBLE,
    task            VARCHAR,        -- diagnostic task, NULL for text pretraining / adaptation
    steps           INTEGER,
    tokens          BIGINT,
    final_val_loss  DOUBLE,
    final_val_ppl   DOUBLE,
    total_params    BIGINT,         -- adapters: all parameters of the adapted model
    summary         JSON,           -- the whole summary file
    pe_options      JSON,           -- the encoding's options (as runs.pe_options); NULL for an adapter
    method          VARCHAR         -- an adapter's method (lora, yarn, tape, ...); NULL for a trained model
);

-- Per-document outputs from samples_<task>.jsonl. Long texts keep their first and last 1500
-- characters around a '[... N characters ...]' marker.
CREATE TABLE IF NOT EXISTS samples (
    run_id   VARCHAR NOT NULL,
    task     VARCHAR NOT NULL,
    doc_id   INTEGER NOT NULL,
    prompt   VARCHAR,
    target   VARCHAR,
    response VARCHAR,
    correct  BOOLEAN,           -- the sample's acc / exact_match when it has one, else NULL
    scores   JSON,              -- the per-document parts of a corpus statistic (peeval.records.DOC_SCORE_KEYS:
                                -- SCROLLS' rouge1/2/L, from which Rgm is computed), NULL when none
    items    JSON               -- every metric the sample lists, its per-sample value (lm-eval's process_results
                                -- item) keyed 'metric,filter': what the run's metrics are recomputed from
                                -- (peeval.records.aggregate; leaderboard.store.aggregate_mismatches)
);

-- ---------------------------------------------------------------------------------------------
-- Paper claims vs peeval's numbers (leaderboard/claims/, stage `claims` after `ingest`). The claims
-- stage writes these two tables into its own file, leaderboard/claims.duckdb (a DVC output cannot be
-- shared by two stages); in the store ingest writes they stay empty. One row per (focus, other)
-- pair of a claim in leaderboard/claims/claims.yaml.
CREATE TABLE IF NOT EXISTS claims (
    claim_id     VARCHAR PRIMARY KEY,
    paper        VARCHAR,
    ref          VARCHAR,
    task         VARCHAR,
    metric       VARCHAR,
    compared     VARCHAR,
    paper_value  DOUBLE,
    peeval_value DOUBLE,
    stderr       DOUBLE,
    n            INTEGER,
    seeds        INTEGER,
    verdict      VARCHAR,   -- 'reproduced' | 'contradicted' | 'inconclusive' (measured, not decided) |
                            -- 'not learned at this scale' (a diagnostic side below the majority answer +
                            -- claims.yaml learned_margin in distribution: no test) | 'no contrast at this
                            -- setting' (both sides at the same floor / ceiling on every seed: no test) |
                            -- 'not decidable here' (a beyond_window claim measured inside the runs'
                            -- training_length: setting_diff says at which length; not in Holm's family) |
                            -- 'not measured' (no peeval number for a side: see measured_in)
    test         VARCHAR,   -- how stderr / the verdict was computed: 'mcnemar' | 'paired-se' (paired on the
                            -- same examples) | 'seeds' | 'lm-eval stderr' | 'binomial' (unpaired; two
                            -- differing ones as 'focus's / other's'); NULL: no uncertainty (README "Claims")
    df           DOUBLE,    -- degrees of freedom of the t behind p_value; NULL: normal (over many examples) or
                            -- exact (mcnemar) (docs/statistics.md "Decision rule")
    p_value      DOUBLE,    -- two-sided p of "no difference" ('better' claims); comparable claims: TOST's p
                            -- (|difference| <= tolerance) or the two-sided p of |difference| > tolerance
    p_adjusted   DOUBLE,    -- Holm-adjusted over every pair of this table with a p-value; the verdict is
                            -- decided on it at 0.05 (NULL: not in the family: no p, no verdict by design, or not decidable here)
    measured_in  VARCHAR,   -- 'not measured' rows: the first profile (params/<name>.yaml) that measures the
                            -- pair, or 'none'; NULL otherwise
    setting_diff VARCHAR,
    run_ids      JSON,
    family       VARCHAR,   -- the pre-registered Holm family ('<paper> @ <profile>', claims.yaml families) the
                            -- pair belongs to; NULL: not declared testable for this profile (no verdict)
    family_m     INTEGER    -- m of that family: every declared pair, a pair without a test counted as p = 1
);

-- One row per (claim, variant): the paper's number and peeval's, in the paper's unit.
CREATE TABLE IF NOT EXISTS claim_values (
    claim_id     VARCHAR,
    variant      VARCHAR,
    encoding     VARCHAR,
    paper_value  DOUBLE,
    paper_std    DOUBLE,
    peeval_value DOUBLE,
    stderr       DOUBLE,
    n            BIGINT,
    seeds        INTEGER,
    run_ids      VARCHAR
);

-- The A/A calibration of the claims' tests (leaderboard/claims/calibration.py): each test run on two halves of
-- one variant's runs (seeds of one encoding and setting), where there is nothing to find. A test whose
-- rejection rate's exact 95 % interval lies above 0.05 decides nothing.
CREATE TABLE IF NOT EXISTS claims_calibration (
    test        VARCHAR,    -- 'runs-t' (the claims' test over runs) or a retired one-run-per-side test
    compared    VARCHAR,    -- which groups of runs were compared
    groups      INTEGER,    -- A/A comparisons made
    rejections  INTEGER,    -- of them with p < 0.05
    rate        DOUBLE,
    lo          DOUBLE,     -- Clopper-Pearson 95 % interval of the rate
    hi          DOUBLE,
    decides     BOOLEAN     -- the test may decide a pair on this store
);

-- Issue 67: per decided pair, the error rate of its test at the pair's own spreads and three sensitivities of its
-- verdict (leaderboard/claims/sensitivity.py, on the claims page under the pair). One row per decided pair.
CREATE TABLE IF NOT EXISTS claims_sensitivity (
    claim_id          VARCHAR,  -- the decided pair (claims.claim_id)
    n_focus           INTEGER,  -- runs a side, and each side's standard deviation over runs in the test's scale
    n_other           INTEGER,  -- (log perplexity for perplexity, else the paper's unit)
    sd_focus          DOUBLE,
    sd_other          DOUBLE,
    draws             INTEGER,  -- simulated nulls: both sides normal, one mean, each its own sd and n (fixed seed)
    welch_rate        DOUBLE,   -- the share of them Welch's t (the test used) rejects at alpha: its calibrated
    welch_lo          DOUBLE,   -- error rate at this pair's variances, with its Clopper-Pearson 95 % interval
    welch_hi          DOUBLE,
    pooled_rate       DOUBLE,   -- the same draws under Student's pooled t
    p_pooled          DOUBLE,   -- the pair's p under pooled t, Holm-adjusted within its paper's family (every
    p_pooled_adjusted DOUBLE,   -- pair of the family re-tested by pooled t), and the verdict that gives
    verdict_pooled    VARCHAR,
    store_m           INTEGER,  -- a store-wide family: every pair of this store with a p-value
    p_store_adjusted  DOUBLE,   -- the pair's Welch p Holm-adjusted in it, and the verdict that gives
    verdict_store     VARCHAR,
    second_size       VARCHAR,  -- the store's other model size (runs.size, e.g. '4x32'); NULL: none in the store
    p_second          DOUBLE,   -- the pair at that size: Welch p (unadjusted, one pair), difference, verdict
    diff_second       DOUBLE,
    verdict_second    VARCHAR,
    second_note       VARCHAR   -- what the second size gave, in words ('no second size' when none)
);

-- Issue 67 item 4: the registration that decides the verdicts (leaderboard/claims/registration.py: the profile's
-- families, the test, the gates and margins) against the one SOURCE.json recorded for the data. One row per
-- profile judged; the claims page shows its line beside each Holm family of that profile.
CREATE TABLE IF NOT EXISTS claims_registration (
    profile         VARCHAR,  -- the profile whose families decide (claims.family '<paper> @ <profile>')
    status          VARCHAR,  -- 'before' (registered before the data) | 'after: exploratory' | 'changed since
                              -- publication' (or a recorded registration that fails its own hash) | 'not recorded'
    line            VARCHAR,  -- what the page says: 'registered <date> (commit ...), data from <date>: before'
    recorded_sha256 VARCHAR,  -- SOURCE.json's registration.sha256 (local runs: the committed registration); NULL: none
    current_sha256  VARCHAR,  -- the registration of the working tree the claims were computed with
    registered      VARCHAR,  -- the committer date of the commit from which the recorded registration held
    data_from       VARCHAR   -- the date of the profile's earliest run (SOURCE.json registration.data_from)
);
