package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// broadcast is the bare WebSocket broadcast of the ceiling: an in-process
// server on loopback whose n groups of m connections each get every frame
// of their group's broadcaster, read by n×m clients in the same process.
type broadcast struct {
	start     time.Time
	groups    [][]*websocket.Conn // the server's side, by group
	mu        sync.Mutex
	joined    chan struct{} // one token per accepted connection
	clients   []*websocket.Conn
	sent      atomic.Int64 // frames written (one per connection)
	received  atomic.Int64 // frames read
	winStart  atomic.Int64 // ns since start: the window of the latencies
	winEnd    atomic.Int64
	measure   atomic.Bool // record latencies
	lat       latencies
	frameSize int
}

func (bc *broadcast) now() time.Duration { return time.Since(bc.start) }

// broadcastCeiling measures frames/s delivered sending as fast as the
// connections take them, then latency paced at pacedRate frames per second
// per group (skipped when 0), each for d.
func broadcastCeiling(ctx context.Context, n, m, frameBytes int, d time.Duration, pacedRate float64) (BroadcastCeiling, error) {
	res := BroadcastCeiling{FrameBytes: frameBytes, PacedRate: pacedRate, Method: fmt.Sprintf(
		"bare WebSocket broadcast (github.com/coder/websocket, in-process over loopback), %d × %d connections, %d-byte frames: as fast as the connections take them for frames/s; paced at Parley's measured rate (%.1f/s per conversation) for latency",
		n, m, frameBytes, pacedRate)}
	bc := &broadcast{start: time.Now(), groups: make([][]*websocket.Conn, n), joined: make(chan struct{}, n*m), frameSize: max(frameBytes, stampLen)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	stop := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, err := strconv.Atoi(r.URL.Query().Get("g"))
		if err != nil || g < 0 || g >= n {
			http.Error(w, "bad group", http.StatusBadRequest)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		cctx := c.CloseRead(context.Background())
		bc.mu.Lock()
		bc.groups[g] = append(bc.groups[g], c)
		bc.mu.Unlock()
		bc.joined <- struct{}{}
		select {
		case <-cctx.Done():
		case <-stop:
		}
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	var readers sync.WaitGroup
	defer func() {
		close(stop)
		for _, c := range bc.clients {
			c.CloseNow()
		}
		for _, g := range bc.groups {
			for _, c := range g {
				c.CloseNow()
			}
		}
		readers.Wait()
		srv.Close()
	}()

	url := "ws://" + ln.Addr().String() + "/?g="
	bc.clients = make([]*websocket.Conn, n*m)
	err = parallel(ctx, n*m, 32, func(ctx context.Context, i int) error {
		c, _, err := websocket.Dial(ctx, url+strconv.Itoa(i/m), nil)
		if err != nil {
			return err
		}
		c.SetReadLimit(int64(bc.frameSize) + 1024)
		bc.clients[i] = c
		return nil
	})
	if err != nil {
		return res, err
	}
	for range n * m {
		select {
		case <-bc.joined:
		case <-time.After(30 * time.Second):
			return res, errors.New("the broadcast connections did not all open within 30s")
		}
	}
	for i, c := range bc.clients {
		readers.Go(func() { bc.read(i, c) })
	}

	// Throughput: every frame written as fast as possible, over the time
	// until the last of them was read (writers run ahead of readers into the
	// sockets' buffers, so frames read in a window would undercount).
	begin, read0 := time.Now(), bc.received.Load()
	if err := bc.phase(d, 0); err != nil {
		return res, err
	}
	res.FramesPerSec = float64(bc.received.Load()-read0) / time.Since(begin).Seconds()
	if pacedRate > 0 {
		bc.measure.Store(true)
		if err := bc.phase(d, pacedRate); err != nil {
			return res, err
		}
		res.Latency = latencyOf(bc.lat.merged())
	}
	return res, nil
}

// phase runs every group's broadcaster for d at rate (0: unpaced) and waits
// until every frame written has been read. Latencies are kept for frames
// sent after the first fifth of d.
func (bc *broadcast) phase(d time.Duration, rate float64) error {
	begin := bc.now()
	bc.winStart.Store(int64(begin + d/5))
	bc.winEnd.Store(int64(begin + d))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr atomic.Value
	for _, g := range bc.groups {
		wg.Go(func() {
			buf := make([]byte, 0, bc.frameSize)
			pace := newPacer(rate)
			for pace.wait(stop) {
				buf = appendStamped(buf[:0], bc.now(), bc.frameSize)
				for _, c := range g {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := c.Write(ctx, websocket.MessageText, buf)
					cancel()
					if err != nil {
						werr.CompareAndSwap(nil, err)
						return
					}
					bc.sent.Add(1)
				}
			}
		})
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	if err, ok := werr.Load().(error); ok {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for bc.received.Load() < bc.sent.Load() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d broadcast frames were not read within 30s", bc.sent.Load()-bc.received.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// read counts the frames one client reads, and their latency when measuring.
func (bc *broadcast) read(i int, c *websocket.Conn) {
	for {
		_, data, err := c.Read(context.Background())
		if err != nil {
			return
		}
		now := bc.now()
		bc.received.Add(1)
		if bc.measure.Load() {
			if sent, ok := parseStamp(string(data[:min(len(data), stampLen)])); ok && int64(sent) >= bc.winStart.Load() && int64(sent) < bc.winEnd.Load() {
				bc.lat.record(i, now-sent)
			}
		}
	}
}
