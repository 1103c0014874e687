-- The fleet's ledger: every gateway's rows, shipped from its local ledger.
-- A row is the local row as committed (its `seq`, `prev_hash` and `hash` in
-- the chain of the file it came from, `source`), so each source's chain can
-- be walked here as it is in the file. Keyed by (call_id, kind): a row
-- shipped twice is inserted once.
CREATE TABLE ledger (
    call_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('open', 'close')),
    source TEXT NOT NULL,
    source_seq BIGINT NOT NULL,
    at_ms BIGINT NOT NULL,
    started_ms BIGINT NOT NULL,
    key_id TEXT,
    member TEXT,
    team TEXT,
    model TEXT NOT NULL,
    category TEXT,
    input BIGINT NOT NULL,
    output BIGINT NOT NULL,
    cache_read BIGINT NOT NULL,
    cache_write BIGINT NOT NULL,
    reasoning BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION,
    body TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    shipped_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (call_id, kind)
);
CREATE UNIQUE INDEX ledger_source_seq ON ledger (source, source_seq);
CREATE INDEX ledger_started ON ledger (started_ms);

-- Append-only, as the local file is.
CREATE FUNCTION weir_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the ledger is append-only: rows are never updated or deleted';
END
$$;
CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION weir_ledger_append_only();
