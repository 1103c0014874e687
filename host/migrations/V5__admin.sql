-- The admin plane (`/admin/v1/...`): runtime keys, member and team budgets,
-- one JSON body per object (only a key's token hash, never the token), and
-- every change to them as a row of its own hash chain: who (the admin key's
-- id), what (action, kind, target), the object before and after. `seq` is
-- the chain's order; `hash` covers the row and the previous row's hash.
CREATE TABLE admin_objects (
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE TABLE admin_changes (
    seq BIGINT PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    before TEXT,
    after TEXT,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
