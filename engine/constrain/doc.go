// Package constrain is constrained decoding: it compiles a JSON schema (or
// any composition of text, JSON values and choices) into a grammar, binds
// the grammar to a model's vocabulary and tells, at each step of
// generation, which tokens may come next.
//
// # Building a grammar
//
// Schema parses a JSON schema in OpenAI's strict subset into an Element (a
// JSON value under that schema); AnyObject is any JSON object (the
// "json_object" response format). Elements compose:
//
//	Literal(text)          text, byte for byte
//	Token(piece)           one vocabulary token by its piece (control tokens)
//	Sequence(e1, e2, ...)  each in turn
//	Choice(e1, e2, ...)    any one of them
//
// Compile turns an Element into an immutable *Grammar; CompileSchema does
// both for a schema. A tool call in Qwen's format, for tool_choice
// "required", is the choice between the calls of each function:
//
//	args, err := constrain.Schema(weatherParams) // the function's "parameters"
//	call := constrain.Sequence(
//		constrain.Literal("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "),
//		args,
//		constrain.Literal("}\n</tool_call>"),
//	)
//	g, err := constrain.Compile(constrain.Choice(call, otherCall))
//
// A named tool_choice is the one Sequence alone. Literal text is matched by
// bytes, whatever tokens the model spells it with; a family whose tool calls
// use control tokens (decoded as nothing) names them with Token.
// Gemma(e) writes e's values in Gemma 4's tool-call notation instead of
// JSON (bare keys, strings between <|"|> tokens) under the same schema
// rules, for a family whose calls are not JSON.
//
// Errors are *Error values with a dotted Path inside the schema
// ("properties.x.pattern") and a message; Error.Prefixed puts the request
// field in front. Everything is bounded: the schema's size and depth, its
// properties and enum values (MaxSchemaBytes, MaxSchemaDepth, MaxProperties,
// MaxEnumValues, MaxEnumBytes), the automaton (MaxNodes), whitespace (MaxIndent) and
// number digits (MaxIntDigits...), the parses followed at
// once (MaxConfigs); a $ref cycle that never writes text or admits no finite
// value is refused at compile time, so matching never recurses without
// consuming and never reaches a state it cannot complete.
//
// # Matching tokens
//
// NewVocab builds a trie of a vocabulary's token bytes from a TokenSource
// (tokenizer.Tokenizer: byte-level BPE pieces give their raw bytes, possibly
// part of a UTF-8 character; SentencePiece pieces their text with "▁" as
// space; byte-fallback pieces one byte). Special and control tokens are not
// in it: they are never allowed inside the text. NewMatcher binds a Grammar
// to a Vocab; Matcher.Start gives the State before any token.
//
// A State advances by token (Advance), says which tokens may come next
// (Mask, one bit per id) and whether the text so far is complete (Complete).
// The caller adds its stop ids (end of turn) to the mask when, and only
// when, the state is complete: then the model may end the text, and only
// then. Clone is cheap (the parse stacks are shared), so a draft of several
// tokens is checked on a clone without touching the state.
//
// Masks are cached in the Matcher: by the parse states relative to the
// deepest stack frame they share, so the mask inside any JSON string (most
// of a document's tokens) is computed once per Matcher, not once per string;
// a token that returns below that frame is continued from the real stack.
// Build one Matcher per schema and model and reuse it across requests.
package constrain
