-- Read by sqlc only, never executed: FTS5 tables have hidden columns named
-- after the table (the first argument of snippet() and bm25(), and the left
-- side of MATCH) and "rank". sqlc's catalog does not know them, so this
-- declares them for type-checking the search query in queries/messages.sql.
ALTER TABLE messages_fts ADD COLUMN messages_fts TEXT;
ALTER TABLE messages_fts ADD COLUMN rank REAL;
