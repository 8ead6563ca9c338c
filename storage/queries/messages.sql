-- name: InsertMessage :one
INSERT INTO messages (conversation_id, parent_id, role, content, stats, created_at)
VALUES (?, ?, ?, ?, ?, ?)
RETURNING *;

-- name: GetMessage :one
SELECT * FROM messages WHERE id = ?;

-- name: UpdateMessage :execrows
UPDATE messages SET content = ?, stats = ? WHERE id = ?;

-- name: ListConversationMessages :many
-- Every message of the conversation (the whole tree), parents before children.
SELECT * FROM messages WHERE conversation_id = ? ORDER BY id;

-- name: ListChildren :many
SELECT * FROM messages WHERE parent_id = ? ORDER BY id;

-- name: ListRoots :many
SELECT * FROM messages WHERE conversation_id = ? AND parent_id IS NULL ORDER BY id;

-- name: ListBranch :many
-- The path from the root down to the given message, root first.
WITH RECURSIVE branch (id, depth) AS (
    SELECT m.id, 0 FROM messages m WHERE m.id = ?
    UNION ALL
    SELECT p.parent_id, b.depth + 1
    FROM branch b JOIN messages p ON p.id = b.id
    WHERE p.parent_id IS NOT NULL
)
SELECT m.id, m.conversation_id, m.parent_id, m.role, m.content, m.stats, m.created_at
FROM branch b JOIN messages m ON m.id = b.id
ORDER BY b.depth DESC;

-- name: DeleteMessage :execrows
-- Deletes the message and, through the foreign key, its whole subtree.
-- Run Reparent on ListBelow's ids first (see there).
DELETE FROM messages WHERE id = ?;

-- Deleting messages must not recurse. SQLite runs the ON DELETE CASCADE of
-- messages.parent_id as a nested trigger program per generation and stops at
-- 1,000 levels (SQLITE_MAX_TRIGGER_DEPTH): a branch of 1,200 messages could
-- never be deleted. The queries below first make the tree flat, so that
-- the delete that follows cascades one level at most; the foreign key still
-- holds at every step, and the caller runs both in one transaction.

-- name: DetachMessages :exec
-- Makes every message of the conversation a root (before the conversation
-- is deleted, which deletes its messages).
UPDATE messages SET parent_id = NULL WHERE conversation_id = ? AND parent_id IS NOT NULL;

-- name: ListBelow :many
-- The ids of every message below the given one (its replies, theirs, ...).
WITH RECURSIVE below (id) AS (
    SELECT c.id FROM messages c WHERE c.parent_id = sqlc.arg(id)
    UNION ALL
    SELECT c.id FROM messages c JOIN below b ON c.parent_id = b.id
)
SELECT CAST(id AS INTEGER) AS id FROM below;

-- name: Reparent :exec
-- Makes the given messages direct replies to parent_id (ListBelow's ids,
-- before the message they are below is deleted, which deletes its replies).
UPDATE messages SET parent_id = sqlc.arg(parent_id) WHERE id IN (sqlc.slice(ids));

-- name: SearchMessages :many
-- Matches in live conversations (not deleted ones), best first.
SELECT m.id, m.conversation_id, m.parent_id, m.role, m.created_at,
       c.title AS conversation_title, c.active_leaf_id,
       CAST(snippet(messages_fts, 0, sqlc.arg(mark_start), sqlc.arg(mark_end), sqlc.arg(ellipsis), 16) AS TEXT) AS snippet
FROM messages_fts
JOIN messages m ON m.id = messages_fts.rowid
JOIN conversations c ON c.id = m.conversation_id
WHERE messages_fts MATCH sqlc.arg(query) AND c.deleted_at IS NULL
ORDER BY bm25(messages_fts), m.id DESC
LIMIT sqlc.arg(max_results);

-- name: ListSiblings :many
-- The message and its siblings (same parent; roots of the same
-- conversation for a root), oldest first.
SELECT s.* FROM messages s JOIN messages m ON m.id = sqlc.arg(id)
WHERE s.conversation_id = m.conversation_id AND s.parent_id IS m.parent_id
ORDER BY s.id;

-- name: LatestLeaf :one
-- The leaf reached from a message by following its newest reply each time.
WITH RECURSIVE down (id, depth) AS (
    SELECT m.id, 0 FROM messages m WHERE m.id = sqlc.arg(id)
    UNION ALL
    SELECT (SELECT max(c.id) FROM messages c WHERE c.parent_id = down.id), down.depth + 1
    FROM down
    WHERE EXISTS (SELECT 1 FROM messages c WHERE c.parent_id = down.id)
)
SELECT CAST(id AS INTEGER) AS leaf FROM down ORDER BY depth DESC LIMIT 1;
