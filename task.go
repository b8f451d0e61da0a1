package parley

// Task is a scheduled prompt (POST /v1/tasks): at each firing a task.run
// event is appended to the conversation and the prompt is queued with the
// run's id as its turnId, so that everything answering it belongs to that
// run. Exactly one of Cron (five fields, as crontab, in UTC) and EveryMs is
// set.
type Task struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversationId"`
	AgentID        string `json:"agentId"`
	Prompt         string `json:"prompt"`
	Cron           string `json:"cron,omitempty"`
	EveryMs        int64  `json:"everyMs,omitempty"`
	NextRunAt      Time   `json:"nextRunAt"`
	CreatedAt      Time   `json:"createdAt"`
}

// TaskAdvance moves a task's next run from From to To; the store applies it
// only if the task still runs at From, so that a firing happens once, even
// with several nodes or after a restart.
type TaskAdvance struct {
	TaskID string
	From   Time
	To     Time
}
