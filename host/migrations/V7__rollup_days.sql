-- The roll-ups' day level (see host/src/ledger/rollup.rs): per UTC day,
-- grouping dimension ('all', 'member', 'key', 'team', 'model', 'provider',
-- 'deployment'), that dimension's value and the category (both as JSON text:
-- null or a string, since a primary key holds no NULL), the closed calls'
-- sums and their latency histogram as one array (calls per bucket, from
-- bucket 0 to the last holding a call). What /v1/usage reads for whole days
-- when the query groups by at most one dimension and filters on nothing but
-- the time and the category. Kept by each shipper in the transaction that
-- appends its rows.
CREATE TABLE ledger_rollup_day (
    dim TEXT NOT NULL,
    day_ms BIGINT NOT NULL,
    value TEXT NOT NULL,
    category TEXT NOT NULL,
    calls BIGINT NOT NULL,
    input BIGINT NOT NULL,
    output BIGINT NOT NULL,
    cache_read BIGINT NOT NULL,
    cache_write BIGINT NOT NULL,
    reasoning BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    calls_without_cost BIGINT NOT NULL,
    latency BIGINT[] NOT NULL,
    PRIMARY KEY (dim, day_ms, value, category)
);

-- The day level of the rows already here, built once from the hour level
-- (which sums them exactly): each dims set under each of its dimensions.
CREATE TEMPORARY TABLE day_dims AS
SELECT d.id, x.dim, COALESCE(to_json(x.value)::text, 'null') AS value,
       COALESCE(to_json(d.category)::text, 'null') AS category
FROM ledger_rollup_dims AS d
CROSS JOIN LATERAL (VALUES ('all', NULL::text), ('member', d.member), ('key', d.key_id), ('team', d.team),
    ('model', d.model), ('provider', d.provider), ('deployment', d.deployment)) AS x(dim, value);

CREATE TEMPORARY TABLE day_latency AS
SELECT x.dim, l.hour_ms - (l.hour_ms % 86400000) AS day_ms, x.value, x.category, l.bucket,
       SUM(l.calls)::bigint AS calls
FROM ledger_rollup_latency AS l JOIN day_dims AS x ON x.id = l.dims
GROUP BY 1, 2, 3, 4, 5;

INSERT INTO ledger_rollup_day
SELECT s.dim, s.day_ms, s.value, s.category, s.calls, s.input, s.output, s.cache_read, s.cache_write,
       s.reasoning, s.cost_usd, s.calls_without_cost,
       COALESCE((SELECT array_agg(COALESCE(l.calls, 0) ORDER BY b.bucket)
                 FROM generate_series(0, (SELECT MAX(m.bucket) FROM day_latency AS m WHERE m.dim = s.dim
                     AND m.day_ms = s.day_ms AND m.value = s.value AND m.category = s.category)) AS b(bucket)
                 LEFT JOIN day_latency AS l ON l.dim = s.dim AND l.day_ms = s.day_ms AND l.value = s.value
                     AND l.category = s.category AND l.bucket = b.bucket), '{}')
FROM (
    SELECT x.dim, r.hour_ms - (r.hour_ms % 86400000) AS day_ms, x.value, x.category,
           SUM(r.calls)::bigint AS calls, SUM(r.input)::bigint AS input, SUM(r.output)::bigint AS output,
           SUM(r.cache_read)::bigint AS cache_read, SUM(r.cache_write)::bigint AS cache_write,
           SUM(r.reasoning)::bigint AS reasoning, SUM(r.cost_usd) AS cost_usd,
           SUM(r.calls_without_cost)::bigint AS calls_without_cost
    FROM ledger_rollup AS r JOIN day_dims AS x ON x.id = r.dims
    GROUP BY 1, 2, 3, 4
    HAVING SUM(r.calls) > 0
) AS s;

DROP TABLE day_latency;
DROP TABLE day_dims;
