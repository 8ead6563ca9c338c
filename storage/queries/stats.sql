-- name: CountRows :one
SELECT
    (SELECT count(*) FROM models)        AS models,
    (SELECT count(*) FROM conversations) AS conversations,
    (SELECT count(*) FROM messages)      AS messages,
    (SELECT count(*) FROM prompts)       AS prompts,
    (SELECT count(*) FROM kv_snapshots)  AS snapshots,
    CAST((SELECT COALESCE(SUM(bytes), 0) FROM kv_snapshots) AS INTEGER) AS snapshot_bytes;
