-- 0001: the initial anechat schema.
--
-- Conventions:
--   * Times are INTEGER Unix milliseconds (UTC): sortable, compact and free of
--     driver-specific time formatting.
--   * JSON columns are BLOBs holding RFC 8259 JSON text. sqlc types them as
--     pqtype.NullRawMessage, which binds []byte (a BLOB) and scans only []byte,
--     so a TEXT value would fail to scan: the CHECKs reject anything that is
--     not a BLOB of valid JSON. SQL functions must read them with
--     json_extract(CAST(col AS TEXT), ...), since SQLite treats a bare BLOB
--     argument as JSONB.
--   * Booleans are INTEGER 0/1.

-- Model files the app knows about (GGUF files, safetensors directories,
-- Core ML bundles).
CREATE TABLE models (
    id            INTEGER PRIMARY KEY,
    path          TEXT    NOT NULL UNIQUE,
    kind          TEXT    NOT NULL CHECK (kind <> ''),
    name          TEXT    NOT NULL DEFAULT '',
    fingerprint   TEXT    NOT NULL,
    size_bytes    INTEGER NOT NULL DEFAULT 0 CHECK (size_bytes >= 0),
    meta          BLOB    CHECK (meta IS NULL OR (typeof(meta) = 'blob' AND json_valid(CAST(meta AS TEXT)))),
    added_at      INTEGER NOT NULL,
    last_used_at  INTEGER
);
CREATE INDEX models_fingerprint ON models (fingerprint);

-- The prompt library: reusable system prompt + body, optionally with a pinned
-- KV snapshot so that starting from the prompt costs no prefill.
CREATE TABLE prompts (
    id                  INTEGER PRIMARY KEY,
    title               TEXT    NOT NULL,
    system_prompt       TEXT    NOT NULL DEFAULT '',
    body                TEXT    NOT NULL DEFAULT '',
    pinned_snapshot_id  INTEGER REFERENCES kv_snapshots (id) ON DELETE SET NULL,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
);
CREATE INDEX prompts_pinned_snapshot ON prompts (pinned_snapshot_id);

-- Tags of a prompt, normalised (trimmed, lower case) by the storage API.
CREATE TABLE prompt_tags (
    prompt_id  INTEGER NOT NULL REFERENCES prompts (id) ON DELETE CASCADE,
    tag        TEXT    NOT NULL CHECK (tag <> ''),
    PRIMARY KEY (prompt_id, tag)
) WITHOUT ROWID;
CREATE INDEX prompt_tags_tag ON prompt_tags (tag, prompt_id);

CREATE TABLE conversations (
    id              INTEGER PRIMARY KEY,
    title           TEXT    NOT NULL DEFAULT '',
    model_id        INTEGER REFERENCES models (id) ON DELETE SET NULL,
    prompt_id       INTEGER REFERENCES prompts (id) ON DELETE SET NULL,
    system_prompt   TEXT    NOT NULL DEFAULT '',
    -- Generation options of the conversation (temperature, width, ...).
    options         BLOB    CHECK (options IS NULL OR (typeof(options) = 'blob' AND json_valid(CAST(options AS TEXT)))),
    -- The leaf of the branch the user is looking at; NULL when empty.
    active_leaf_id  INTEGER REFERENCES messages (id) ON DELETE SET NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX conversations_updated ON conversations (updated_at DESC, id DESC);

-- Messages form a tree per conversation: editing a user message or
-- regenerating an answer adds a sibling under the same parent, so every
-- root-to-leaf path is one branch of the conversation.
CREATE TABLE messages (
    id               INTEGER PRIMARY KEY,
    conversation_id  INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    parent_id        INTEGER REFERENCES messages (id) ON DELETE CASCADE,
    role             TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    content          TEXT    NOT NULL,
    -- Per-message generation stats (tokens, TTFT, tok/s, drafted/accepted).
    stats            BLOB    CHECK (stats IS NULL OR (typeof(stats) = 'blob' AND json_valid(CAST(stats AS TEXT)))),
    created_at       INTEGER NOT NULL
);
CREATE INDEX messages_conversation ON messages (conversation_id, id);
CREATE INDEX messages_parent ON messages (parent_id, id);

-- A parent must live in the same conversation as its child; a foreign key
-- alone cannot say that.
CREATE TRIGGER messages_parent_same_conversation
BEFORE INSERT ON messages
WHEN NEW.parent_id IS NOT NULL
 AND (SELECT conversation_id FROM messages WHERE id = NEW.parent_id) IS NOT NEW.conversation_id
BEGIN
    SELECT RAISE(ABORT, 'parent message belongs to another conversation');
END;

-- Full-text index over message content (external content: the text lives
-- once, in messages). The triggers keep it in sync.
CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content,
    content = 'messages',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (NEW.id, NEW.content);
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', OLD.id, OLD.content);
END;

CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', OLD.id, OLD.content);
    INSERT INTO messages_fts (rowid, content) VALUES (NEW.id, NEW.content);
END;

-- KV cache snapshots on disk (files in the data dir's kv/). A row is written
-- only after its file is complete (DESIGN.md invariant 6).
CREATE TABLE kv_snapshots (
    id                     INTEGER PRIMARY KEY,
    -- Path relative to the kv/ directory (normally the content-hash file name).
    file_path              TEXT    NOT NULL UNIQUE CHECK (file_path <> ''),
    model_fingerprint      TEXT    NOT NULL,
    tokenizer_fingerprint  TEXT    NOT NULL,
    template_hash          TEXT    NOT NULL DEFAULT '',
    token_count            INTEGER NOT NULL CHECK (token_count >= 0),
    bytes                  INTEGER NOT NULL CHECK (bytes >= 0),
    created_at             INTEGER NOT NULL,
    last_used_at           INTEGER NOT NULL,
    pinned                 INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
    conversation_id        INTEGER REFERENCES conversations (id) ON DELETE SET NULL,
    prompt_id              INTEGER REFERENCES prompts (id) ON DELETE SET NULL
);
CREATE INDEX kv_snapshots_lru ON kv_snapshots (pinned, last_used_at, id);
CREATE INDEX kv_snapshots_conversation ON kv_snapshots (conversation_id);
CREATE INDEX kv_snapshots_prompt ON kv_snapshots (prompt_id);

-- The token prefix of a snapshot in 64-token blocks: row i holds the chained
-- hash of tokens [0, 64*(i+1)) (engine/kv.BlockHashes, which also binds the
-- model, tokenizer and template; storage treats it as opaque text). A chained
-- hash at block i stands for the whole prefix, so the longest stored prefix
-- of a new prompt is the matching row with the highest block_index: one
-- indexed lookup over the prompt's block hashes, no file is read.
CREATE TABLE kv_snapshot_blocks (
    snapshot_id  INTEGER NOT NULL REFERENCES kv_snapshots (id) ON DELETE CASCADE,
    block_index  INTEGER NOT NULL CHECK (block_index >= 0),
    prefix_hash  TEXT    NOT NULL CHECK (prefix_hash <> ''),
    PRIMARY KEY (snapshot_id, block_index)
) WITHOUT ROWID;
CREATE INDEX kv_snapshot_blocks_hash ON kv_snapshot_blocks (prefix_hash, block_index);

-- Application settings: key -> JSON value.
CREATE TABLE settings (
    key         TEXT    PRIMARY KEY,
    value       BLOB    NOT NULL CHECK (typeof(value) = 'blob' AND json_valid(CAST(value AS TEXT))),
    updated_at  INTEGER NOT NULL
) WITHOUT ROWID;
