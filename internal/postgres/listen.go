package postgres

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/feed"
)

// Every commit of appends notifies its schema's channel (channelSQL), with
// a payload of lines "CONVERSATION SEQ" (and " q" when its prompt queue
// changed): each conversation written and its last seq now. A delete
// notifies it too, with the line "CONVERSATION 0 d". Each schema has a
// channel of its own, named for it, so that stores in several schemas of
// one database do not hear each other's appends.
const channelSQL = `'parley_events_' || substr(md5(coalesce(current_schema(), '')), 1, 16)`

// listenQuery returns the statement that listens to the channel of conn's
// schema.
func listenQuery(ctx context.Context, conn *pgx.Conn) (string, error) {
	var ch string
	if err := conn.QueryRow(ctx, `SELECT `+channelSQL).Scan(&ch); err != nil {
		return "", err
	}
	return "LISTEN " + pgx.Identifier{ch}.Sanitize(), nil
}

// Broker hears the appends of every node on one database (LISTEN/NOTIFY):
// the feed's Broker of several nodes.
type Broker struct {
	// URL is the database's (a postgres:// URL).
	URL string
}

// Listen follows the appends of every node on the database, on a
// connection of its own, until ctx ends: it calls notified for each
// (conversation, seq) written, and caughtUp each time it (re)connects,
// since notifications sent while it was away are lost (the events are
// not: they are in the table). It reconnects with a growing pause (up to
// 5 s) and returns only when ctx ends.
func (b Broker) Listen(ctx context.Context, notified func(feed.Notice), caughtUp func()) {
	url := b.URL
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		if err := listenOnce(ctx, url, notified, caughtUp); err == nil || ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

func listenOnce(ctx context.Context, url string, notified func(feed.Notice), caughtUp func()) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	listen, err := listenQuery(ctx, conn)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, listen); err != nil {
		return err
	}
	caughtUp()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(n.Payload, "\n") {
			if n, ok := parseNotice(line); ok {
				notified(n)
			}
		}
	}
}

// parseNotice reads one line of a notification (see channelSQL); it
// reports false for a line it cannot read, which is skipped. A flag it
// does not know (a newer node's) is passed over: the line still says the
// conversation changed.
func parseNotice(line string) (feed.Notice, bool) {
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return feed.Notice{}, false
	}
	seq, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil || seq < 0 {
		return feed.Notice{}, false
	}
	n := feed.Notice{ConversationID: fields[0], Seq: seq}
	for _, flag := range fields[2:] {
		switch flag {
		case flagQueued:
			n.Queue = true
		case flagDeleted:
			n.Deleted = true
		}
	}
	return n, true
}

// Listeners counts the connections to the database at url, other than
// its own, that listen for Parley's appends: one per running node.
func Listeners(ctx context.Context, url string) (int, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	listen, err := listenQuery(ctx, conn)
	if err != nil {
		return 0, err
	}
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query = $1`,
		listen).Scan(&n)
	return n, err
}
