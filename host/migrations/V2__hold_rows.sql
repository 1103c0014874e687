-- Hold rows: a call's budget hold, kept so that a call a crash cut off (held,
-- never closed) still counts its worst case when budgets are rebuilt.
ALTER TABLE ledger DROP CONSTRAINT ledger_kind_check;
ALTER TABLE ledger ADD CONSTRAINT ledger_kind_check CHECK (kind IN ('open', 'close', 'hold'));
-- A closing row whose budgets were charged the hold's worst case (its usage was
-- never reported): the rebuild counts the hold row instead.
ALTER TABLE ledger ADD COLUMN charged_worst INTEGER NOT NULL DEFAULT 0 CHECK (charged_worst IN (0, 1));
