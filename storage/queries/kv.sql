-- name: InsertSnapshot :one
INSERT INTO kv_snapshots (file_path, model_fingerprint, tokenizer_fingerprint, template_hash,
                          token_count, bytes, created_at, last_used_at, pinned,
                          conversation_id, prompt_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING *;

-- name: InsertSnapshotBlock :exec
INSERT INTO kv_snapshot_blocks (snapshot_id, block_index, prefix_hash) VALUES (?, ?, ?);

-- name: GetSnapshot :one
SELECT * FROM kv_snapshots WHERE id = ?;

-- name: GetSnapshotByPath :one
SELECT * FROM kv_snapshots WHERE file_path = ?;

-- name: ListSnapshots :many
SELECT * FROM kv_snapshots ORDER BY id;

-- name: ListConversationSnapshots :many
SELECT * FROM kv_snapshots WHERE conversation_id = ? ORDER BY id;

-- name: ListSnapshotBlocks :many
SELECT prefix_hash FROM kv_snapshot_blocks WHERE snapshot_id = ? ORDER BY block_index;

-- name: PrefixCandidates :many
-- Snapshots of this model and tokenizer holding any of the given chained
-- block hashes, deepest block first; among equal depths the snapshot needing
-- the least truncation, then the most recently used. The caller checks that
-- the hash sits at the block index it has in the prompt.
SELECT s.id, s.file_path, s.model_fingerprint, s.tokenizer_fingerprint, s.template_hash,
       s.token_count, s.bytes, s.created_at, s.last_used_at, s.pinned,
       s.conversation_id, s.prompt_id,
       b.block_index, b.prefix_hash
FROM kv_snapshot_blocks b
JOIN kv_snapshots s ON s.id = b.snapshot_id
WHERE s.model_fingerprint = ?
  AND s.tokenizer_fingerprint = ?
  -- Plain ? above and the slice last: sqlc v1.31 numbers named arguments
  -- (?2, ?3), which clash with the placeholders the slice expands to.
  AND b.prefix_hash IN (sqlc.slice(hashes))
ORDER BY b.block_index DESC, s.token_count ASC, s.last_used_at DESC, s.id DESC;

-- name: TouchSnapshot :execrows
UPDATE kv_snapshots SET last_used_at = ? WHERE id = ?;

-- name: SetSnapshotPinned :execrows
UPDATE kv_snapshots SET pinned = ? WHERE id = ?;

-- name: TotalSnapshotBytes :one
SELECT CAST(COALESCE(SUM(bytes), 0) AS INTEGER) AS total FROM kv_snapshots;

-- name: EvictableSnapshots :many
-- Unpinned snapshots that no prompt pins, least recently used first.
SELECT * FROM kv_snapshots
WHERE pinned = 0
  AND id NOT IN (SELECT pinned_snapshot_id FROM prompts WHERE pinned_snapshot_id IS NOT NULL)
ORDER BY last_used_at ASC, id ASC;

-- name: DeleteSnapshot :execrows
DELETE FROM kv_snapshots WHERE id = ?;

-- name: DeleteSnapshotByPath :execrows
DELETE FROM kv_snapshots WHERE file_path = ?;

-- name: ListPromptSnapshots :many
SELECT * FROM kv_snapshots WHERE prompt_id = ? ORDER BY id;
