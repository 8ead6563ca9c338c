-- 0003: the unsent text of a conversation's composer.
--
--   * draft: what the user typed and has not sent yet (Chat.SetDraft), so
--     that switching conversations or restarting the app keeps it; '' when
--     none. Saving it does not touch updated_at: typing is not activity that
--     reorders the list.
ALTER TABLE conversations ADD COLUMN draft TEXT NOT NULL DEFAULT '';
