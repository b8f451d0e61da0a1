package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/parleyhq/parley"
)

// NewTask is the body of CreateTask: a prompt queued in a conversation on
// a schedule, by five-field cron (read in UTC) or every EveryMs
// milliseconds (at least 1000). Give one of them.
type NewTask = parley.CreateTaskRequest

// CreateTask schedules a prompt; AgentID, whom it asks as, is needed only
// with an admin token (or an open server).
func (c *Client) CreateTask(ctx context.Context, t NewTask) (*parley.Task, error) {
	return call[parley.Task](ctx, c, http.MethodPost, "/v1/tasks", t)
}

// DeleteTask unschedules a task.
func (c *Client) DeleteTask(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/tasks/"+url.PathEscape(id), nil, nil)
}

// Tasks returns the scheduled tasks the token may see: an agent token, its
// agent's; admin and viewer tokens, all.
func (c *Client) Tasks(ctx context.Context) ([]*parley.Task, error) {
	r, err := call[struct {
		Tasks []*parley.Task `json:"tasks"`
	}](ctx, c, http.MethodGet, "/v1/tasks", nil)
	if err != nil {
		return nil, err
	}
	return r.Tasks, nil
}
