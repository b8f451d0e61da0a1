package conv

import "github.com/parleyhq/parley"

// The names below are parley's wire types, kept here for the code that
// still reaches them through conv (the API's chat and answer-status
// streams); new code names them in parley.
type (
	// QueuedPrompt is parley.QueuedPrompt.
	QueuedPrompt = parley.QueuedPrompt
	// PromptStatus is parley.PromptStatus.
	PromptStatus = parley.PromptStatus
	// WaitingOn is parley.WaitingOn.
	WaitingOn = parley.WaitingOn
)

// PromptQueued is parley.PromptStateQueued.
const PromptQueued = parley.PromptStateQueued
