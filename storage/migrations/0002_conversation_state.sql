-- 0002: what the desktop app keeps per conversation besides its messages.
--
--   * pinned: pinned conversations are listed first.
--   * deleted_at: a deleted conversation stays (hidden from lists, search and
--     lookups) until its undo window has passed and it is purged; NULL while
--     it is live. Unix milliseconds, like every time column.
--   * title_source: who wrote the title: '' (the default "New chat"),
--     'message' (taken from the first user message), 'model' (a short title
--     the model wrote), 'prompt' (the library prompt it started from),
--     'import' (from an imported file) or 'user' (typed by the user; only
--     the user changes it again).
ALTER TABLE conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1));
ALTER TABLE conversations ADD COLUMN deleted_at INTEGER;
ALTER TABLE conversations ADD COLUMN title_source TEXT NOT NULL DEFAULT ''
    CHECK (title_source IN ('', 'message', 'model', 'user', 'prompt', 'import'));

DROP INDEX conversations_updated;
CREATE INDEX conversations_listed ON conversations (deleted_at, pinned DESC, updated_at DESC, id DESC);
