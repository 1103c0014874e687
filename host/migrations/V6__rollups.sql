-- Hourly roll-ups of the fleet's ledger (see host/src/ledger/rollup.rs): what
-- /v1/usage and the budgets' rebuild read for whole hours instead of the rows.
-- Kept by each shipper in the transaction that appends its rows. A dims set
-- is named once by its signature, the JSON array of its values as
-- json_build_array writes it (the shipper names new ones the same way).
CREATE TABLE ledger_rollup_dims (
    id BIGSERIAL PRIMARY KEY,
    signature TEXT NOT NULL UNIQUE,
    key_id TEXT,
    member TEXT,
    team TEXT,
    model TEXT NOT NULL,
    provider TEXT,
    deployment TEXT,
    category TEXT
);
CREATE TABLE ledger_rollup (
    hour_ms BIGINT NOT NULL,
    dims BIGINT NOT NULL,
    calls BIGINT NOT NULL,
    input BIGINT NOT NULL,
    output BIGINT NOT NULL,
    cache_read BIGINT NOT NULL,
    cache_write BIGINT NOT NULL,
    reasoning BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    calls_without_cost BIGINT NOT NULL,
    charged_rows BIGINT NOT NULL,
    charged_input BIGINT NOT NULL,
    charged_output BIGINT NOT NULL,
    charged_cache_read BIGINT NOT NULL,
    charged_cache_write BIGINT NOT NULL,
    charged_reasoning BIGINT NOT NULL,
    charged_cost_usd DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (hour_ms, dims)
);
CREATE TABLE ledger_rollup_latency (
    hour_ms BIGINT NOT NULL,
    dims BIGINT NOT NULL,
    bucket BIGINT NOT NULL,
    calls BIGINT NOT NULL,
    PRIMARY KEY (hour_ms, dims, bucket)
);

-- The roll-ups of the rows already here, built once. A hold counts towards
-- the charge unless its call closed at its usage (charged_worst = 0), as the
-- rebuild's query (sql.rs, CHARGED) counts it.
CREATE TEMPORARY TABLE rollup_rows AS
SELECT started_ms - (started_ms % 3600000) AS hour_ms, kind, charged_worst, input, output, cache_read,
       cache_write, reasoning, cost_usd, at_ms - started_ms AS latency_ms,
       kind = 'hold' AND EXISTS (SELECT 1 FROM ledger AS closed WHERE closed.started_ms = spent.started_ms
           AND closed.call_id = spent.call_id AND closed.kind = 'close' AND closed.charged_worst = 0) AS released,
       json_build_array(key_id, member, team, model,
           CASE WHEN kind = 'close' THEN CAST(body AS jsonb) ->> 'provider' END,
           CASE WHEN kind = 'close' THEN CAST(body AS jsonb) -> 'attempts' -> -1 ->> 'deployment' END,
           CASE WHEN kind = 'close' THEN category END)::text AS signature
FROM ledger AS spent WHERE kind <> 'open';

INSERT INTO ledger_rollup_dims (signature, key_id, member, team, model, provider, deployment, category)
SELECT DISTINCT signature, CAST(signature AS jsonb) ->> 0, CAST(signature AS jsonb) ->> 1,
       CAST(signature AS jsonb) ->> 2, CAST(signature AS jsonb) ->> 3, CAST(signature AS jsonb) ->> 4,
       CAST(signature AS jsonb) ->> 5, CAST(signature AS jsonb) ->> 6
FROM rollup_rows;

INSERT INTO ledger_rollup
SELECT r.hour_ms, d.id,
       COUNT(*) FILTER (WHERE kind = 'close'),
       COALESCE(SUM(input) FILTER (WHERE kind = 'close'), 0),
       COALESCE(SUM(output) FILTER (WHERE kind = 'close'), 0),
       COALESCE(SUM(cache_read) FILTER (WHERE kind = 'close'), 0),
       COALESCE(SUM(cache_write) FILTER (WHERE kind = 'close'), 0),
       COALESCE(SUM(reasoning) FILTER (WHERE kind = 'close'), 0),
       COALESCE(SUM(cost_usd) FILTER (WHERE kind = 'close'), 0.0),
       COUNT(*) FILTER (WHERE kind = 'close' AND cost_usd IS NULL),
       COUNT(*) FILTER (WHERE (kind = 'close' AND charged_worst = 0) OR (kind = 'hold' AND NOT released)),
       COALESCE(SUM(input) FILTER (WHERE (kind = 'close' AND charged_worst = 0) OR (kind = 'hold' AND NOT released)), 0),
       COALESCE(SUM(output) FILTER (WHERE (kind = 'close' AND charged_worst = 0) OR (kind = 'hold' AND NOT released)), 0),
       COALESCE(SUM(cache_read) FILTER (WHERE (kind = 'close' AND charged_worst = 0) OR (kind = 'hold' AND NOT released)), 0),
       COALESCE(SUM(cache_write) FILTER (WHERE (kind = 'close' AND charged_worst = 0) OR (kind = 'hold' AND NOT released)), 0),
       COALESCE(SUM(reasoning) FILTER (WHERE (kind = 'close' AND charged_worst = 0) OR (kind = 'hold' AND NOT released)), 0),
       COALESCE(SUM(cost_usd) FILTER (WHERE (kind = 'close' AND charged_worst = 0) OR (kind = 'hold' AND NOT released)), 0.0)
FROM rollup_rows AS r JOIN ledger_rollup_dims AS d ON d.signature = r.signature
GROUP BY r.hour_ms, d.id;

-- Latency buckets as rollup.rs counts them: ceil(4 log2(ms)), 0 to 127.
INSERT INTO ledger_rollup_latency
SELECT r.hour_ms, d.id,
       CASE WHEN latency_ms <= 1 THEN 0
            ELSE LEAST(127, CEIL(4 * LOG(2.0, CAST(latency_ms AS NUMERIC))))::bigint END,
       COUNT(*)
FROM rollup_rows AS r JOIN ledger_rollup_dims AS d ON d.signature = r.signature
WHERE kind = 'close'
GROUP BY 1, 2, 3;

DROP TABLE rollup_rows;
