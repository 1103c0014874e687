-- Hold rows: a call's budget hold, kept so that a call a crash cut off (held,
-- never closed) still counts its worst case when budgets are rebuilt.
ALTER TABLE ledger DROP CONSTRAINT ledger_kind_check;
ALTER TABLE ledger ADD CONSTRAINT ledger_kind_check CHECK (kind IN ('open', 'close', 'hold'));
