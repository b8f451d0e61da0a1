package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/parleyhq/parley"
)

// Export writes conversation id in format ("markdown", "json" or "jsonl";
// "" is json) to w, and returns how many bytes it wrote.
func (c *Client) Export(ctx context.Context, id, format string, w io.Writer) (int64, error) {
	path := convPath(id, "/export")
	if format != "" {
		path += "?format=" + url.QueryEscape(format)
	}
	return c.download(ctx, path, w)
}

// Backup writes a copy of the server's whole store to w as it streams in
// (GET /v1/admin/backup: an SQLite database file, as it was at one moment
// while the server ran), and returns how many bytes it wrote. It needs an
// admin token; a server on PostgreSQL answers not_found, one already
// making or sending a backup busy. A copy cut short is an error, not a
// shorter file: write it to a file of its own and keep that only when
// Backup returns nil (`parley restore` restores it).
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	return c.download(ctx, "/v1/admin/backup", w)
}

// download copies the body of GET path to w, through a buffer of its own
// size (io.Copy's), and checks that the whole body the server announced
// came.
func (c *Client) download(ctx context.Context, path string, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+path, nil)
	if err != nil {
		return 0, err
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return 0, decodeError(resp.StatusCode, resp.Header, data)
	}
	n, err := io.Copy(w, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("GET %s ended after %d of %d bytes", path, n, resp.ContentLength)
	}
	return n, err
}

// ImportOptions tune Import.
type ImportOptions struct {
	// ID is the imported conversation's id (default: the export's, or a new
	// one for legacy rows).
	ID string
	// Title and Participants name a conversation made of legacy rows.
	Title        string
	Participants []string
}

// ImportWarning is one oddity of imported legacy data.
type ImportWarning struct {
	Row       int    `json:"row"`
	Kind      string `json:"kind"`
	MessageID string `json:"messageId,omitempty"`
	Text      string `json:"text"`
}

// ImportResult is the server's account of an import.
type ImportResult struct {
	Conversation parley.Conversation `json:"conversation"`
	// Source is "export" or "legacy".
	Source            string          `json:"source"`
	Events            int64           `json:"events"`
	Messages          int64           `json:"messages"`
	Bytes             int64           `json:"bytes"`
	Warnings          []ImportWarning `json:"warnings"`
	WarningCounts     map[string]int  `json:"warningCounts"`
	WarningsTruncated bool            `json:"warningsTruncated"`
}

// Import sends r (a Parley export or legacy message rows) to the server,
// which imports it as it arrives. It needs an admin token.
func (c *Client) Import(ctx context.Context, r io.Reader, opts ImportOptions) (*ImportResult, error) {
	q := url.Values{}
	for k, v := range map[string]string{"id": opts.ID, "title": opts.Title, "participants": strings.Join(opts.Participants, ",")} {
		if v != "" {
			q.Set(k, v)
		}
	}
	path := "/v1/conversations/import"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var res ImportResult
	if err := c.doBody(ctx, http.MethodPost, path, r, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
