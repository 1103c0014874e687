-- Stored responses (`POST /v1/responses` with `store: true`): the response
-- object, its own input items and the items a `previous_response_id`
-- continues from, owned by the key (and member) that made it, until
-- `expires_at` (unix seconds). Unlike the ledger, rows are deleted: by their
-- owner (`DELETE /v1/responses/{id}`) and once expired.
CREATE TABLE stored_responses (
    id TEXT PRIMARY KEY,
    key_id TEXT,
    member TEXT,
    model TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    response TEXT NOT NULL,
    input_items TEXT NOT NULL,
    context TEXT NOT NULL
);
CREATE INDEX stored_responses_expiry ON stored_responses (expires_at);
