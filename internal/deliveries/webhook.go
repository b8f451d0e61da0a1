package deliveries

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/parleyhq/parley"
)

// post posts one delivery to its channel type's webhook. Its errors never
// hold the webhook's URL, which may hold a secret: they are kept and shown
// to admins, and logged.
func post(ctx context.Context, o Options, d *parley.Delivery) error {
	hook, ok := o.Webhooks[d.Channel.Type]
	if !ok {
		return permanent(fmt.Errorf("no webhook is configured for channel type %q", d.Channel.Type))
	}
	status := d.MessageStatus
	if status == "" {
		status = parley.StatusComplete // a row from before the status was kept: only complete replies were sent
	}
	body, _ := json.Marshal(map[string]any{"conversationId": d.ConversationID, "messageId": d.MessageID, "channel": d.Channel, "content": d.Content, "status": status})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook, bytes.NewReader(body))
	if err != nil {
		return permanent(errors.New("the webhook's URL is not one a request can be made to"))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", d.ID) // the server's, never a client's
	resp, err := o.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return fmt.Errorf("posting to the webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch c := resp.StatusCode; {
	case c/100 == 2:
		return nil
	case c/100 == 4 && c != http.StatusRequestTimeout && c != http.StatusTooEarly && c != http.StatusTooManyRequests:
		return permanent(fmt.Errorf("webhook answered HTTP %d", c))
	default:
		return fmt.Errorf("webhook answered HTTP %d", c)
	}
}

// permanentError is a failure that trying again cannot mend.
type permanentError struct{ error }

func (p permanentError) Unwrap() error { return p.error }

func permanent(err error) error { return permanentError{err} }

// isPermanent reports whether err is a failure that trying again cannot mend.
func isPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}
