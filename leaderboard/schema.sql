-- peeval's result store: leaderboard/peeval.duckdb (DuckDB 1.5 storage, readable by the duckdb CLI 1.5).
-- Written only by leaderboard/ingest.py, one transaction per ingest, except the claims tables at the end
-- (the claims stage, its own file); every statement is idempotent.
--
-- A *run* is one `peeval eval` results directory (results.json + samples_<task>.jsonl). Its run_id
-- is the first 16 hex digits of the sha256 of results.json: the same file always gets the same id,
-- and re-ingesting it replaces its rows (so ingesting twice gives the same rows).
-- A *checkpoint* is a training or adaptation output directory (train_summary.json + train_curve.csv,
-- or adapt_summary.json), keyed by its path relative to the directory ingest ran from.

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
    source               VARCHAR NOT NULL DEFAULT 'local',  -- 'local' (this pipeline) or 'published/<profile>'
    machine              VARCHAR               -- published runs: the machine SOURCE.json names (NULL: local)
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

-- peeval_ppl_<corpus>: one row per evaluated context length.
CREATE TABLE IF NOT EXISTS ppl_by_length (
    run_id   VARCHAR NOT NULL,
    corpus   VARCHAR NOT NULL,  -- 'pg19', 'proof_pile', ...
    length   INTEGER NOT NULL,  -- window length L in tokens
    ppl      DOUBLE,            -- token perplexity (ppl@L)
    bpb      DOUBLE,            -- bits per byte (bpb@L)
    tokens   BIGINT,            -- scored tokens (tokens@L)
    windows  BIGINT,            -- windows scored (windows@L)
    protocol VARCHAR
);

-- peeval_passkey: exact-match accuracy per (length, depth) cell.
CREATE TABLE IF NOT EXISTS passkey_cells (
    run_id VARCHAR NOT NULL,
    length INTEGER NOT NULL,
    depth  DOUBLE NOT NULL,     -- 0 = needle right after the intro, 1 = right before the question
    acc    DOUBLE,
    n      INTEGER
);

-- peeval_diag_<task>_<split>: overall accuracy (cell 'all'), other accuracies under their metric name
-- (flip-flop 'read_acc', 'seq_acc') and per-cell accuracies (acc@<cell>; addition cells 'AxB' also
-- fill len_a / len_b).
CREATE TABLE IF NOT EXISTS diagnostic_cells (
    run_id VARCHAR NOT NULL,
    task   VARCHAR NOT NULL,    -- generator name: indirect_indexing, flip_flop, selective_copy, counting, addition
    split  VARCHAR NOT NULL,    -- test or an OOD split name
    cell   VARCHAR NOT NULL,
    len_a  INTEGER,
    len_b  INTEGER,
    acc    DOUBLE,
    n      INTEGER
);

-- train_curve.csv of each checkpoint.
CREATE TABLE IF NOT EXISTS training_curves (
    checkpoint VARCHAR NOT NULL,
    step       INTEGER NOT NULL,
    tokens     BIGINT,
    lr         DOUBLE,
    train_loss DOUBLE,
    val_loss   DOUBLE,              -- NULL at steps without validation
    elapsed_s  DOUBLE
);

-- Cost of each checkpoint: train_summary.json (pretraining / diagnostics) or adapt_summary.json.
CREATE TABLE IF NOT EXISTS efficiency (
    checkpoint      VARCHAR PRIMARY KEY,
    pe              VARCHAR,        -- encoding, or 'adapt:<method>' for an adapter
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
    summary         JSON            -- the whole summary file
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
    correct  BOOLEAN            -- the sample's acc / exact_match when it has one, else NULL
);

-- ---------------------------------------------------------------------------------------------
-- Paper claims vs peeval's numbers (leaderboard/claims/, stage `claims` after `ingest`). The claims
-- stage writes these two tables into its own file, leaderboard/claims.duckdb (a DVC output cannot be
-- shared by two stages); in the store ingest writes they stay empty. One row per (focus, other)
-- pair of a claim in leaderboard/claims.yaml.
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
    verdict      VARCHAR,
    test         VARCHAR,   -- how stderr / the verdict was computed: 'mcnemar' | 'paired-se' (paired on the
                            -- same examples) | 'seeds' | 'lm-eval stderr' | 'binomial' (unpaired; two
                            -- differing ones as 'focus's / other's'); NULL: no uncertainty (README "Claims")
    setting_diff VARCHAR,
    run_ids      JSON
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
