package feed_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/feed"
	"github.com/parleyhq/parley/internal/store"
)

// memLog is a conversation's log in memory: the hub's Reader.
type memLog struct {
	mu     sync.Mutex
	events []parley.Event // seq i+1 at i
}

func (l *memLog) append(n int) []parley.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []parley.Event
	for range n {
		ev := parley.Event{Seq: int64(len(l.events) + 1), Type: "trace", Data: []byte(`{}`)}
		l.events = append(l.events, ev)
		out = append(out, ev)
	}
	return out
}

func (l *memLog) ReadEvents(_ context.Context, p store.ReadEventsParams) ([]parley.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []parley.Event
	for _, ev := range l.events {
		if ev.Seq > p.After && len(out) < p.Limit {
			out = append(out, ev)
		}
	}
	return out, nil
}

// TestSubscriptionMergesHistoryAndLive: a table of the ways live events
// and the log interleave around a subscriber's join; in every one the
// subscriber gets each event after its position once, in order.
func TestSubscriptionMergesHistoryAndLive(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before writes the log before the subscription; during runs
		// inside join (writes racing with the join) and returns the seq
		// joined at; after runs once subscribed. Each may publish.
		before int
		during func(l *memLog, h *feed.Hub) int64
		after  func(l *memLog, h *feed.Hub)
		want   int64 // the last seq expected
	}{
		{"history only", 5, func(*memLog, *feed.Hub) int64 { return 0 }, nil, 5},
		{"resume in the middle of the history", 5, func(*memLog, *feed.Hub) int64 { return 3 }, nil, 5},
		{"live only", 3, func(*memLog, *feed.Hub) int64 { return 3 },
			func(l *memLog, h *feed.Hub) { h.Publish("c", l.append(4), nil) }, 7},
		{"writes during the join are in the history and queued live too", 5,
			func(l *memLog, h *feed.Hub) int64 { h.Publish("c", l.append(2), nil); return 2 }, nil, 7},
		{"a live event past a gap: the gap is read from the log", 2, func(*memLog, *feed.Hub) int64 { return 2 },
			func(l *memLog, h *feed.Hub) {
				evs := l.append(5) // 3..7 are in the log, only 3 and 7 are published
				h.Publish("c", evs[:1], nil)
				h.Publish("c", evs[4:], nil)
			}, 7},
		{"published twice (caught up and written here): once", 2, func(*memLog, *feed.Hub) int64 { return 2 },
			func(l *memLog, h *feed.Hub) {
				evs := l.append(3)
				h.Publish("c", evs, nil)
				h.Publish("c", evs[1:], nil)
				h.Publish("c", l.append(1), nil)
			}, 6},
		{"another conversation's events are not this one's", 2, func(*memLog, *feed.Hub) int64 { return 0 },
			func(l *memLog, h *feed.Hub) {
				h.Publish("other", []parley.Event{{Seq: 1}, {Seq: 2}, {Seq: 3}}, nil)
				h.Publish("c", l.append(1), nil)
			}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			l := &memLog{}
			l.append(tc.before)
			h := feed.New(l, feed.Options{})
			var from int64
			sub, err := h.Subscribe(ctx, "c", func() (int64, error) { from = tc.during(l, h); return from, nil })
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			if tc.after != nil {
				tc.after(l, h)
			}
			for next := from + 1; next <= tc.want; next++ {
				select {
				case it := <-sub.C:
					if it.Event == nil || it.Event.Seq != next {
						t.Fatalf("got %+v, want seq %d", it, next)
					}
				case <-ctx.Done():
					t.Fatalf("waiting for seq %d: %v", next, ctx.Err())
				}
			}
			select {
			case it := <-sub.C:
				t.Fatalf("after seq %d, more: %+v", tc.want, it)
			case <-time.After(50 * time.Millisecond):
			}
			sub.Close()
			sub.Err()
			if held := h.Held(); held != 0 {
				t.Fatalf("the subscription ended, and the hub holds %d bytes for it", held)
			}
		})
	}
}

// TestGuidanceAfterHistoryIsAsOfTheEventsSent: a guidance queued before
// events that were sent from the log still arrives, as of those events.
func TestGuidanceAfterHistoryIsAsOfTheEventsSent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := &memLog{}
	l.append(2)
	h := feed.New(l, feed.Options{})
	sub, err := h.Subscribe(ctx, "c", func() (int64, error) {
		l.append(2) // written during the join, its guidance published alone
		h.Publish("c", nil, &parley.Guidance{NextAgentID: "bob", AfterSeq: 2})
		return 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []string
	for len(got) < 5 {
		it := <-sub.C
		if it.Event != nil {
			got = append(got, fmt.Sprint(it.Event.Seq))
		} else {
			got = append(got, fmt.Sprintf("g%d", it.Guidance.AfterSeq))
		}
	}
	if fmt.Sprint(got) != "[1 2 3 4 g4]" {
		t.Fatalf("got %v, want the events, then the guidance as of seq 4", got)
	}
}

// TestSlowAndEndedSubscribers: a subscriber that lets its queue fill is
// ended with ErrSlow, and the publisher never waits for it; End ends the
// subscribers of one conversation with the error given.
func TestSlowAndEndedSubscribers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := &memLog{}
	h := feed.New(l, feed.Options{Buffer: 100})
	slow, err := h.Subscribe(ctx, "c", func() (int64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	for range 300 { // never read: the handoff and the queue fill
		h.Publish("c", l.append(1), nil)
	}
	for range slow.C {
	}
	if !errors.Is(slow.Err(), feed.ErrSlow) {
		t.Fatalf("the slow subscriber ended with %v, want ErrSlow", slow.Err())
	}
	gone := parley.Errorf(parley.ENOTFOUND, "deleted")
	sub, err := h.Subscribe(ctx, "c", func() (int64, error) { return int64(len(l.events)), nil })
	if err != nil {
		t.Fatal(err)
	}
	h.End("c", gone)
	for range sub.C {
	}
	if !errors.Is(sub.Err(), gone) {
		t.Fatalf("the ended subscriber: %v, want %v", sub.Err(), gone)
	}
	if _, err := h.Subscribe(ctx, "c", func() (int64, error) { h.Publish("c", l.append(1), nil); return 0, gone }); !errors.Is(err, gone) {
		t.Fatalf("a failed join: %v", err)
	}
	if held := h.Held(); held != 0 {
		t.Fatalf("every subscription ended (slow, ended, failed to join), and the hub holds %d bytes", held)
	}
}

// TestNotifyKicksAReaderThatDoesNotWait: a follower read only with no
// wait is kicked when events are queued for it, when it overflows, and
// when its conversation ends, and not after Notify(nil); each kick finds
// what it was for.
func TestNotifyKicksAReaderThatDoesNotWait(t *testing.T) {
	l := &memLog{}
	h := feed.New(l, feed.Options{Buffer: 4})
	follow := func() (*feed.Follower, *int) {
		f, err := h.Follow(func() (int64, error) { return 0, nil }, "c")
		if err != nil {
			t.Fatal(err)
		}
		kicks := new(int)
		f.Notify(func() { *kicks++ }) // under the follower's lock: no race
		return f, kicks
	}
	drain := func(f *feed.Follower) (n int, err error) {
		for {
			_, err := f.Next(context.Background(), 0)
			if errors.Is(err, feed.ErrIdle) {
				return n, nil
			}
			if err != nil {
				return n, err
			}
			n++
		}
	}

	f, kicks := follow()
	g, _ := follow()
	h.Publish("c", l.append(2), nil)
	if n, err := drain(f); *kicks != 1 || n != 2 || err != nil {
		t.Fatalf("after a publish: %d kicks, %d items, %v; want 1, 2, nil", *kicks, n, err)
	}
	h.Publish("c", l.append(5), nil) // over its buffer of 4
	if n, err := drain(f); *kicks != 2 || n != 0 || !errors.Is(err, feed.ErrSlow) {
		t.Fatalf("after an overflow: %d kicks, %d items, %v; want 2, 0, ErrSlow", *kicks, n, err)
	}

	g.Notify(nil)
	if _, err := drain(g); !errors.Is(err, feed.ErrSlow) {
		t.Fatalf("the other follower: %v, want ErrSlow", err)
	}
	f, kicks = follow()
	h.End("c", errors.New("deleted"))
	if _, err := drain(f); *kicks != 1 || err == nil || err.Error() != "deleted" {
		t.Fatalf("after End: %d kicks, %v; want 1, deleted", *kicks, err)
	}
	f, kicks = follow()
	h.EndAll(errors.New("shutting down"))
	f.Notify(nil)
	h.Publish("c", l.append(1), nil)
	if *kicks != 1 {
		t.Fatalf("after EndAll and Notify(nil): %d kicks, want 1", *kicks)
	}
}
