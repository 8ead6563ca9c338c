-- name: CreateConversation :one
INSERT INTO conversations (title, model_id, prompt_id, system_prompt, options, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
RETURNING *;

-- name: GetConversation :one
SELECT * FROM conversations WHERE id = ?;

-- name: ListConversations :many
SELECT * FROM conversations ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?;

-- name: UpdateConversation :execrows
UPDATE conversations
SET title = ?, model_id = ?, system_prompt = ?, options = ?, updated_at = ?
WHERE id = ?;

-- name: SetActiveLeaf :execrows
UPDATE conversations SET active_leaf_id = ?, updated_at = ? WHERE id = ?;

-- name: DeleteConversation :execrows
DELETE FROM conversations WHERE id = ?;
