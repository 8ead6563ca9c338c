-- name: CreatePrompt :one
INSERT INTO prompts (title, system_prompt, body, pinned_snapshot_id, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?)
RETURNING *;

-- name: GetPrompt :one
SELECT * FROM prompts WHERE id = ?;

-- name: ListPrompts :many
SELECT * FROM prompts ORDER BY updated_at DESC, id DESC;

-- name: ListPromptsByTag :many
SELECT p.* FROM prompts p
WHERE p.id IN (SELECT t.prompt_id FROM prompt_tags t WHERE t.tag = ?)
ORDER BY p.updated_at DESC, p.id DESC;

-- name: UpdatePrompt :execrows
UPDATE prompts SET title = ?, system_prompt = ?, body = ?, updated_at = ? WHERE id = ?;

-- name: SetPromptSnapshot :execrows
UPDATE prompts SET pinned_snapshot_id = ?, updated_at = ? WHERE id = ?;

-- name: DeletePrompt :execrows
DELETE FROM prompts WHERE id = ?;

-- name: AddPromptTag :exec
INSERT INTO prompt_tags (prompt_id, tag) VALUES (?, ?) ON CONFLICT DO NOTHING;

-- name: ClearPromptTags :exec
DELETE FROM prompt_tags WHERE prompt_id = ?;

-- name: ListPromptTags :many
SELECT tag FROM prompt_tags WHERE prompt_id = ? ORDER BY tag;

-- name: ListAllTags :many
SELECT tag, COUNT(*) AS prompts FROM prompt_tags GROUP BY tag ORDER BY tag;

-- name: ListPromptsPinning :many
SELECT id FROM prompts WHERE pinned_snapshot_id = ? ORDER BY id;
