-- A call's budget hold can be topped up (its output budget escalated): each
-- top-up is a hold row of its own in the local file, and a call cut off by a
-- crash is charged every one of them. Keyed by (call_id, kind), this table
-- kept the first hold row and dropped the top-ups, so a fleet rebuilt from it
-- charged such a call less than its own file did. Rows are now keyed by where
-- they come from (a file's `source` and its `seq` there): a row shipped twice
-- is still inserted once, and each hold row of a call is kept.
ALTER TABLE ledger DROP CONSTRAINT ledger_pkey;
ALTER TABLE ledger ADD CONSTRAINT ledger_pkey PRIMARY KEY USING INDEX ledger_source_seq;
-- A call's rows are still looked up by its id (an answer's earlier rows, one
-- call's record, the calls never closed).
CREATE INDEX ledger_call ON ledger (call_id, kind);
