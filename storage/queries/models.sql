-- name: UpsertModel :one
INSERT INTO models (path, kind, name, fingerprint, size_bytes, meta, added_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (path) DO UPDATE SET
    kind = excluded.kind,
    name = excluded.name,
    fingerprint = excluded.fingerprint,
    size_bytes = excluded.size_bytes,
    meta = excluded.meta
RETURNING *;

-- name: GetModel :one
SELECT * FROM models WHERE id = ?;

-- name: GetModelByPath :one
SELECT * FROM models WHERE path = ?;

-- name: ListModels :many
SELECT * FROM models ORDER BY COALESCE(last_used_at, added_at) DESC, id DESC;

-- name: TouchModel :execrows
UPDATE models SET last_used_at = ? WHERE id = ?;

-- name: DeleteModel :execrows
DELETE FROM models WHERE id = ?;

-- name: ListModelsByFingerprint :many
SELECT * FROM models WHERE fingerprint = ? ORDER BY id;
