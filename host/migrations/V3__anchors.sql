-- Anchors: each source file's chain head after a shipped batch (its last row's
-- source_seq and hash), with an HMAC-SHA256 of them when the gateway has an
-- anchor key. The shared verify checks every source's rows reach each anchor
-- with the anchored hash: rows deleted from a source's end, or a recomputed
-- chain, no longer pass.
CREATE TABLE ledger_anchor (
    source TEXT NOT NULL,
    source_seq BIGINT NOT NULL CHECK (source_seq > 0),
    hash TEXT NOT NULL,
    mac TEXT,
    PRIMARY KEY (source, source_seq)
);
-- Append-only, as the ledger table is.
CREATE TRIGGER ledger_anchor_append_only BEFORE UPDATE OR DELETE ON ledger_anchor
    FOR EACH ROW EXECUTE FUNCTION weir_ledger_append_only();
