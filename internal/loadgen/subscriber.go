package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/client"
)

// subscriber follows one conversation with the SDK's self-resuming stream.
type subscriber struct {
	b          *bench
	c          *conversation
	ready      chan struct{} // closed at the first init
	readyOnce  sync.Once
	lastSeq    atomic.Int64
	deltas     atomic.Int64   // text deltas received (a chunk event holds one or more)
	index      int            // picks its shard of the latency histogram
	node       *client.Client // the node it follows the conversation on
	frameBytes int64          // sum of the sampled chunk events' JSON sizes
	frames     int64          // how many were sampled
}

// run reads frames until ctx ends.
func (s *subscriber) run(ctx context.Context) {
	transport := client.WebSocket
	if s.b.cfg.Transport == TransportSSE {
		transport = client.SSE
	}
	st := s.node.Subscribe(ctx, s.c.id, client.SubscribeOptions{Transport: transport, OnReconnect: func(err error) {
		if ctx.Err() == nil {
			s.b.fail(&s.b.cnt.subscriberErrors, fmt.Errorf("subscriber reconnects: %w", err))
		}
	}})
	defer st.Close()
	for {
		f, err := st.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.b.fail(&s.b.cnt.subscriberErrors, fmt.Errorf("subscriber stopped: %w", err))
			}
			s.readyOnce.Do(func() { close(s.ready) })
			return
		}
		now := s.b.now()
		switch {
		case f.Init != nil:
			if f.Init.Position.Seq > s.lastSeq.Load() {
				s.lastSeq.Store(f.Init.Position.Seq)
			}
			s.readyOnce.Do(func() { close(s.ready) })
		case f.Event != nil:
			s.lastSeq.Store(f.Event.Seq)
			s.b.cnt.events.Add(1)
			if f.Event.Type != parley.EventChunk {
				continue
			}
			s.b.cnt.chunks.Add(1)
			ch, err := parley.ParseChunk(f.Event.Data)
			if err != nil {
				s.b.fail(&s.b.cnt.subscriberErrors, fmt.Errorf("subscriber: bad chunk: %w", err))
				continue
			}
			// The server may write deltas that came together as one chunk:
			// every delta is DeltaBytes long and starts with its send time.
			size := s.b.cfg.DeltaBytes
			if len(ch.Content)%size != 0 {
				s.b.fail(&s.b.cnt.subscriberErrors, fmt.Errorf("subscriber: a chunk of %d bytes is not whole %d-byte deltas", len(ch.Content), size))
				continue
			}
			s.b.cnt.deltasDelivered.Add(int64(len(ch.Content) / size))
			for at := 0; at < len(ch.Content); at += size {
				s.deltas.Add(1)
				if sent, ok := parseStamp(ch.Content[at : at+size]); ok && s.b.inWindow(sent) {
					s.b.lat.record(s.index, now-sent)
				}
			}
			if s.frames < 16 { // the size of the frame, for the broadcast ceiling
				if b, err := json.Marshal(f.Event); err == nil {
					s.frameBytes += int64(len(b))
					s.frames++
				}
			}
		}
	}
}
