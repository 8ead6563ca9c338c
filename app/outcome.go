package app

// Outcome is how an action the window started ended when that is more than
// success or failure: a kind the window switches on, and a sentence it shows
// as it is. A failure stays an error (its text is shown, never matched); an
// end the user asked for or should only be told about is an Outcome, so the
// window never reads a kind out of an error's text.
type Outcome struct {
	Kind    OutcomeKind `json:"kind"`
	Message string      `json:"message"`
}

// OutcomeKind says how an action ended. The constants below are the one list
// of kinds; frontend/src/types.ts mirrors it as a union of their values, and
// TestFrontendTypesMatchGo fails when the two differ.
type OutcomeKind string

// The kinds of outcome, by the service method that returns them.
const (
	// OutcomePrepared: Library.Prepare pinned the prompt's KV snapshot;
	// the message says with which model it resumes.
	OutcomePrepared OutcomeKind = "prepared"
	// OutcomeTooShort: Library.Prepare found the prompt's opening too
	// short for a snapshot to pay (ErrPromptTooShort). A fact, not a
	// failure: the window shows it as information.
	OutcomeTooShort OutcomeKind = "too_short"
	// OutcomeLoaded: Models.Load loaded the model.
	OutcomeLoaded OutcomeKind = "loaded"
	// OutcomeCancelled: Models.CancelLoad (or the window closing) stopped
	// Models.Load; no model is left half loaded.
	OutcomeCancelled OutcomeKind = "cancelled"
)
