package feed_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/feed"
)

// BenchmarkFanOut measures the hub's part of streaming: one event of
// about 300 bytes published to 1000 followers of a conversation, each of
// which then takes it (as a stream's pump does), on two goroutines
// taking half the followers each. It reports the time per delivery.
//
//	go test -run '^$' -bench FanOut ./feed
func BenchmarkFanOut(b *testing.B) {
	const followers = 1000
	l := &memLog{}
	h := feed.New(l, feed.Options{})
	fs := make([]*feed.Follower, followers)
	for i := range fs {
		f, err := h.Follow(func() (int64, error) { return 0, nil }, "c")
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		fs[i] = f
	}
	ctx := context.Background()
	ev := []parley.Event{{Type: "chunk", Data: make([]byte, 300)}}
	b.ResetTimer()
	for i := range b.N {
		ev[0].Seq = int64(i + 1)
		h.Publish("c", ev, nil)
		var wg sync.WaitGroup
		for half := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, f := range fs[half*followers/2 : (half+1)*followers/2] {
					for {
						if _, err := f.Next(ctx, 0); errors.Is(err, feed.ErrIdle) {
							break
						} else if err != nil {
							b.Error(err)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*followers), "ns/delivery")
}
