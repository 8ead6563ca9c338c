-- Deleted conversations (deleted_at set) wait for their undo window to pass;
-- every query but the undo and purge ones skips them.

-- name: CreateConversation :one
INSERT INTO conversations (title, title_source, model_id, prompt_id, system_prompt, options, pinned, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING *;

-- name: GetConversation :one
SELECT * FROM conversations WHERE id = ? AND deleted_at IS NULL;

-- name: ListConversations :many
-- Pinned first, then the most recently updated.
SELECT * FROM conversations
WHERE deleted_at IS NULL
ORDER BY pinned DESC, updated_at DESC, id DESC
LIMIT ? OFFSET ?;

-- name: UpdateConversation :execrows
UPDATE conversations
SET title = ?, title_source = ?, model_id = ?, system_prompt = ?, options = ?, updated_at = ?
WHERE id = ? AND deleted_at IS NULL;

-- name: SetConversationTitleIf :execrows
-- Sets the title only while its source is still the expected one (an
-- automatic title never replaces one the user typed meanwhile).
UPDATE conversations
SET title = ?, title_source = ?, updated_at = ?
WHERE id = ? AND deleted_at IS NULL AND title_source = sqlc.arg(expect_source);

-- name: SetConversationPinned :execrows
UPDATE conversations SET pinned = ? WHERE id = ? AND deleted_at IS NULL;

-- name: SetActiveLeaf :execrows
UPDATE conversations SET active_leaf_id = ?, updated_at = ? WHERE id = ? AND deleted_at IS NULL;

-- name: SoftDeleteConversation :execrows
UPDATE conversations SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL;

-- name: RestoreConversation :execrows
-- Undoes a deletion made at or after the cutoff.
UPDATE conversations SET deleted_at = NULL
WHERE id = ? AND deleted_at IS NOT NULL AND deleted_at >= sqlc.arg(cutoff);

-- name: NextPurgeable :one
-- The first conversation after the given id deleted before the cutoff:
-- PurgeDeleted removes them one at a time.
SELECT id FROM conversations
WHERE deleted_at IS NOT NULL AND deleted_at < sqlc.arg(cutoff) AND id > sqlc.arg(after)
ORDER BY id LIMIT 1;

-- name: PurgeDeletedConversation :execrows
-- Removes for good the conversation if it was deleted before the cutoff.
-- Run DetachMessages on it first (see there).
DELETE FROM conversations WHERE id = ? AND deleted_at IS NOT NULL AND deleted_at < sqlc.arg(cutoff);

-- name: DeleteConversation :execrows
-- Run DetachMessages on it first (see there).
DELETE FROM conversations WHERE id = ?;

-- name: SetConversationDraft :execrows
-- The composer's unsent text; updated_at stays (typing does not reorder the list).
UPDATE conversations SET draft = ? WHERE id = ? AND deleted_at IS NULL;

-- name: EmptyConversationFromPrompt :one
-- The newest live conversation started from the prompt that holds nothing
-- the user wrote: no message, and no draft but the prompt's own body
-- (starting from the prompt again reuses it instead of making another).
SELECT * FROM conversations c
WHERE c.prompt_id = ? AND c.deleted_at IS NULL AND (c.draft = '' OR c.draft = sqlc.arg(body))
  AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id)
ORDER BY c.id DESC
LIMIT 1;
