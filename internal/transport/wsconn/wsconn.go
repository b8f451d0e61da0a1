// Package wsconn is the server side of Parley's WebSocket connections
// (streams and runners), on the low-level framing of github.com/gobwas/ws,
// built for many connections that are idle most of the time: a connection
// holds no buffer while it is idle (a batch of frames is written into a
// buffer taken from a pool and given back at the flush), reads without one
// unless asked to, and needs no goroutine of the server's HTTP handling
// once upgraded. Writes may come from two goroutines (a writer, and the
// reader answering pings and closes); reads from one.
package wsconn

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
)

// Status codes a connection is closed with.
const (
	StatusNormal       ws.StatusCode = 1000
	StatusGoingAway    ws.StatusCode = 1001
	StatusTooBig       ws.StatusCode = 1009
	StatusInternal     ws.StatusCode = 1011
	StatusTryAgain     ws.StatusCode = 1013
	StatusProtocol     ws.StatusCode = 1002
	StatusUnsupported  ws.StatusCode = 1003
	StatusPolicy       ws.StatusCode = 1008
	StatusInvalidFrame ws.StatusCode = 1007
)

// Options configure Upgrade.
type Options struct {
	// OriginPatterns are the host patterns (path.Match syntax) of other
	// origins whose browsers may connect. Same-origin requests and clients
	// that send no Origin are always accepted; any other origin gets 403.
	OriginPatterns []string
	// ReadLimit bounds one message read (default 32 KiB): a larger one
	// closes the connection with status 1009.
	ReadLimit int64
	// BufferedReads reads through a buffer, for a connection that is sent
	// many frames (a runner's): lent from a pool for each read while Serve
	// reads it as frames arrive, its own while one goroutine reads it for
	// good. Others read the socket directly.
	BufferedReads bool
	// WriteTimeout bounds the writes to a peer that stops reading (0:
	// none): a write still blocked between half of WriteTimeout and all of
	// it after its batch began fails (see armLocked).
	WriteTimeout time.Duration
	// Budget, if set, lends the room of every data message over
	// LargeMessage bytes that Serve or Read keeps: asked before its
	// payload is read (a message in several frames, as it grows), given
	// back once the message was handled or reading ended. A connection it
	// has no room for is closed with status 1013 (try again later).
	Budget Budget
	// ReadTimeout bounds how long the payload of a frame that makes a
	// message over LargeMessage may take to arrive (0: no bound); past it
	// the connection is closed.
	ReadTimeout time.Duration
}

// LargeMessage is the size past which a message read takes room from
// Options.Budget: a smaller one's buffer is the connection's own.
const LargeMessage = 64 << 10

// Budget lends room, in bytes, to the messages connections read (see
// Options.Budget). It is used by every connection's reader at once.
type Budget interface {
	// Reserve takes n bytes, or reports that fewer are left.
	Reserve(n int64) bool
	// Release gives back n bytes reserved.
	Release(n int64)
}

// ErrClosed is what Read returns once the peer closed the connection (a
// close frame, or the end of the stream).
var ErrClosed = errors.New("websocket closed")

// Conn is an upgraded WebSocket connection.
type Conn struct {
	conn net.Conn
	// r is what frames are read from: the socket, or a buffer over it.
	r     io.Reader
	limit int64
	// lend is set for a connection with BufferedReads that a goroutine
	// reads only while something arrived (see Serve): its buffer is lent
	// from a pool for each such read, and given back once it is empty,
	// so that a connection waiting for its peer holds none.
	lend bool
	src  io.Reader // the socket, under a lent buffer

	wmu    sync.Mutex // guards bw, closed, deadline and the socket's writes
	bw     *bufio.Writer
	closed bool
	// timeout is Options.WriteTimeout; deadline is the write deadline the
	// socket has now (zero: none).
	timeout  time.Duration
	deadline time.Time
	// aborted is set by Abort: every write fails at once.
	aborted atomic.Bool
	// ended is set for the reader: once the server has closed the
	// connection, Read returns nothing more (the socket may still be read
	// past for a moment: see lingerLocked).
	ended atomic.Bool
	// unanswered is set by Ping and cleared by a pong.
	unanswered atomic.Bool
	// rbuf is the buffer Read reads messages into.
	rbuf []byte
	// budget and readTimeout are Options'; held is the room the message
	// being read holds of budget (used by the reader only).
	budget      Budget
	readTimeout time.Duration
	held        int64
	// early is set when the client sent frames before its handshake was
	// answered: they are read from a buffer, which no epoll sees.
	early bool
	// watch is set by Watch.
	watch *watching
}

// buffers holds the write buffers of every connection.
var buffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 16<<10) }}

// Upgrade checks the request's origin (403 for a foreign one) and upgrades
// it to a WebSocket connection, taking the connection over from net/http:
// the handler may return and leave it to goroutines of the caller's. On
// failure the client has been answered.
func Upgrade(w http.ResponseWriter, r *http.Request, o Options) (*Conn, error) {
	if err := checkOrigin(r, o.OriginPatterns); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return nil, err
	}
	conn, rw, _, err := ws.HTTPUpgrader{}.Upgrade(r, w)
	if err != nil {
		return nil, err
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = 32 << 10
	}
	c := &Conn{conn: conn, limit: o.ReadLimit, timeout: o.WriteTimeout, budget: o.Budget, readTimeout: o.ReadTimeout}
	// What the client sent after its handshake, already read into net/http's
	// buffer, is read first; the buffer itself is let go.
	var early []byte
	if n := rw.Reader.Buffered(); n > 0 {
		early, _ = rw.Reader.Peek(n)
		early = bytes.Clone(early)
	}
	var src io.Reader = conn
	if len(early) > 0 {
		src = io.MultiReader(bytes.NewReader(early), conn)
		c.early = true
	}
	c.r, c.src = src, src
	c.lend = o.BufferedReads // until Serve knows how the connection is read
	return c, nil
}

// readBuffers are the read buffers lent to connections with BufferedReads
// while a goroutine reads what arrived: a runner's window of deltas (8 of
// about 120 bytes) in one read.
var readBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 1<<10) }}

// lent counts the read buffers lent now.
var lent atomic.Int64

// borrow gives a connection that lends its buffer one to read through.
func (c *Conn) borrow() {
	if c.lend {
		br := readBuffers.Get().(*bufio.Reader)
		br.Reset(c.src)
		c.r = br
		lent.Add(1)
	}
}

// ownBuffer gives a connection that lends its buffer, but is read by one
// goroutine for as long as it lasts, a buffer of its own instead.
func (c *Conn) ownBuffer() {
	if c.lend {
		c.lend = false
		c.r = bufio.NewReaderSize(c.src, 1<<10)
	}
}

// giveBack returns a lent buffer. What it holds unread is dropped: it is
// called once the buffer is empty, or once reading has ended for good.
func (c *Conn) giveBack() {
	if br, ok := c.r.(*bufio.Reader); ok && c.lend {
		br.Reset(nil)
		readBuffers.Put(br)
		c.r = c.src
		lent.Add(-1)
	}
}

// checkOrigin accepts a request with no Origin, a same-origin one, and one
// from a host OriginPatterns names.
func checkOrigin(r *http.Request, patterns []string) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil {
		return errors.New("the request's Origin is not a URL")
	}
	if strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	for _, p := range patterns {
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(u.Host)); ok {
			return nil
		}
	}
	return errors.New("the request's Origin is not allowed: " + u.Host)
}

// armLocked gives the socket a write deadline WriteTimeout away, unless
// the one it has is still more than half of that away: a connection
// written to often moves its deadline (a timer of the runtime's) once per
// half timeout, not at every batch, and an idle one keeps a deadline in
// the past until its next write. c.wmu must be held.
func (c *Conn) armLocked() {
	if c.timeout <= 0 || c.aborted.Load() {
		return
	}
	now := time.Now()
	if c.deadline.Sub(now) > c.timeout/2 {
		return
	}
	c.deadline = now.Add(c.timeout)
	_ = c.conn.SetWriteDeadline(c.deadline)
	if c.aborted.Load() { // Abort came meanwhile
		_ = c.conn.SetWriteDeadline(time.Now())
	}
}

// Abort makes the write under way fail at once, and every write after it
// (a close frame too: the connection is then closed without one). Any
// goroutine may call it, while another writes.
func (c *Conn) Abort() {
	c.aborted.Store(true)
	_ = c.conn.SetWriteDeadline(time.Now())
}

// Resume undoes an Abort that came once no write was under way (the one it
// meant to stop had finished): writes go on, with a deadline set afresh by
// the next one. The caller must know that no write is under way.
func (c *Conn) Resume() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.aborted.Swap(false) {
		c.deadline = time.Time{}
		_ = c.conn.SetWriteDeadline(time.Time{})
	}
}

// WriteText adds a text message to the batch being written: it reaches the
// peer at the next Flush (or sooner, when the buffer fills).
func (c *Conn) WriteText(p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.frameLocked(ws.NewTextFrame(p))
}

// Flush sends the batch, and gives its buffer back to the pool.
func (c *Conn) Flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.flushLocked()
}

// frameLocked writes a frame into the batch; c.wmu must be held.
func (c *Conn) frameLocked(f ws.Frame) error {
	if c.closed {
		return net.ErrClosed
	}
	c.armLocked() // a full buffer writes to the socket before the flush
	if c.bw == nil {
		c.bw = buffers.Get().(*bufio.Writer)
		c.bw.Reset(c.conn)
	}
	return ws.WriteFrame(c.bw, f)
}

// flushLocked sends the batch; c.wmu must be held.
func (c *Conn) flushLocked() error {
	if c.bw == nil {
		return nil
	}
	err := c.bw.Flush()
	c.bw.Reset(nil)
	buffers.Put(c.bw)
	c.bw = nil
	return err
}

// ErrNoPong is what Ping returns when the peer did not answer the ping
// before it: a peer silent for a whole interval between pings is gone.
var ErrNoPong = errors.New("the peer answered no ping")

// Ping sends a ping. It fails with ErrNoPong, sending nothing, if the
// ping it sent before is still unanswered.
func (c *Conn) Ping() error {
	if c.unanswered.Swap(true) {
		return ErrNoPong
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.frameLocked(ws.NewPingFrame(nil)); err != nil {
		return err
	}
	return c.flushLocked()
}

// Close sends a close frame with code and reason, after whatever the
// batch holds, and closes the connection, letting the peer read the
// close frame first (lingerLocked). The reason is cut to fit a control
// frame.
func (c *Conn) Close(code ws.StatusCode, reason string) error {
	if len(reason) > 120 {
		reason = reason[:120]
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	err := c.frameLocked(ws.NewCloseFrame(ws.NewCloseFrameBody(code, reason)))
	if err == nil {
		err = c.flushLocked()
	}
	if err != nil {
		c.closeLocked()
		return err
	}
	c.lingerLocked()
	return nil
}

// What a connection closed by the server reads past before it lets go of
// the socket (see lingerLocked).
const (
	lingerTime  = time.Second
	lingerBytes = 1 << 20
	// maxLingering bounds the sockets read past at once, across all
	// connections: beyond it (a flood of clients that get themselves
	// closed), a socket is closed at once, and its peer may see a reset.
	maxLingering = 1024
)

// lingering counts the sockets being read past.
var lingering atomic.Int64

// lingerLocked ends a connection whose close frame was just sent: it
// shuts down the sending side (the peer reads the close frame, then the
// end of the stream) and reads past what the peer still sends, for up to
// lingerTime and lingerBytes or until the peer closes, before closing the
// socket. Closed at once with unread data, a socket answers the peer with
// a reset, which takes the close frame with it: a client that was still
// writing (a message over the limit, say) would see "connection reset"
// rather than why it was closed.
func (c *Conn) lingerLocked() {
	hc, ok := c.conn.(interface{ CloseWrite() error })
	if !ok || lingering.Add(1) > maxLingering {
		if ok {
			lingering.Add(-1)
		}
		c.closeLocked()
		return
	}
	if hc.CloseWrite() != nil {
		lingering.Add(-1)
		c.closeLocked()
		return
	}
	c.release()
	conn := c.conn
	go func() {
		defer lingering.Add(-1)
		_ = conn.SetReadDeadline(time.Now().Add(lingerTime))
		_, _ = io.CopyN(io.Discard, conn, lingerBytes)
		conn.Close()
	}()
}

// CloseNow closes the connection without a close frame.
func (c *Conn) CloseNow() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.closeLocked()
}

func (c *Conn) closeLocked() {
	if c.closed {
		return
	}
	c.release()
	c.conn.Close()
}

// release marks c closed, stops watching it (see Watch) and gives back its
// write buffer; c.wmu is held.
func (c *Conn) release() {
	first := !c.closed
	c.closed = true
	c.ended.Store(true)
	if first {
		c.unwatch()
	}
	if c.bw != nil {
		c.bw.Reset(nil)
		buffers.Put(c.bw)
		c.bw = nil
	}
}

// Read returns the next data message (text or binary), answering pings
// and noting pongs on the way. A close frame from the peer is answered and
// ends the connection (ErrClosed), and so does the end of the stream; a
// message over the read limit closes it with status 1009, a protocol error
// with 1002. The returned bytes are valid until the next Read: a
// connection reads every message into one buffer of its own.
func (c *Conn) Read() ([]byte, error) {
	c.ownBuffer()
	msg := c.rbuf[:0]
	defer func() {
		// The message is the caller's now; a large one's buffer is let go.
		c.giveRoom()
		if cap(msg) <= LargeMessage {
			c.rbuf = msg[:0]
		}
	}()
	fragmented := false
	for {
		if c.ended.Load() {
			return nil, ErrClosed
		}
		var fin bool
		var err error
		if msg, fin, err = c.frame(true, msg, &fragmented); err != nil {
			return nil, err
		}
		if fin {
			if c.ended.Load() {
				return nil, ErrClosed // closed while it was read: nothing more is taken
			}
			return msg, nil
		}
	}
}

// frame reads one frame. A control frame is handled (see control); a data
// frame's payload is appended to msg if keep, else read past, and fin
// reports whether it ended its message. fragmented says whether a message
// was begun and not ended, across calls.
func (c *Conn) frame(keep bool, msg []byte, fragmented *bool) (_ []byte, fin bool, _ error) {
	h, err := ws.ReadHeader(c.r)
	if err != nil {
		c.CloseNow()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, false, ErrClosed
		}
		return nil, false, err
	}
	if !h.Masked || h.Rsv != 0 {
		c.Close(StatusProtocol, "client frames must be masked, with no extension bits")
		return nil, false, ErrClosed
	}
	if h.OpCode.IsControl() {
		if h.Length > 125 || !h.Fin {
			c.Close(StatusProtocol, "control frames are short and whole")
			return nil, false, ErrClosed
		}
		p, err := c.payload(h, nil)
		if err != nil {
			return nil, false, err
		}
		return msg, false, c.control(h, p)
	}
	switch {
	case h.OpCode == ws.OpContinuation && !*fragmented, h.OpCode != ws.OpContinuation && *fragmented:
		c.Close(StatusProtocol, "continuation frames out of place")
		return nil, false, ErrClosed
	case h.OpCode != ws.OpContinuation && h.OpCode != ws.OpText && h.OpCode != ws.OpBinary:
		c.Close(StatusProtocol, "unknown opcode")
		return nil, false, ErrClosed
	}
	size := int64(len(msg)) + h.Length
	if size > c.limit {
		c.Close(StatusTooBig, "message too big")
		return nil, false, ErrClosed
	}
	if !keep {
		err = c.skip(h.Length)
	} else if size > LargeMessage {
		msg, err = c.largePayload(h, msg, size)
	} else {
		msg, err = c.payload(h, msg)
	}
	if err != nil {
		return nil, false, err
	}
	*fragmented = !h.Fin
	return msg, h.Fin, nil
}

// control handles a control frame (a data frame is dropped): a ping is
// answered, a pong noted, a close answered and reported as ErrClosed.
func (c *Conn) control(h ws.Header, p []byte) error {
	switch h.OpCode {
	case ws.OpPing:
		c.wmu.Lock()
		err := c.frameLocked(ws.NewPongFrame(p))
		if err == nil {
			err = c.flushLocked()
		}
		c.wmu.Unlock()
		return err
	case ws.OpPong:
		c.unanswered.Store(false)
	case ws.OpClose:
		code, _ := ws.ParseCloseFrameData(p)
		if code.Empty() {
			code = StatusNormal
		}
		c.Close(code, "")
		return ErrClosed
	}
	return nil
}

// skip reads past n bytes of a frame's payload.
func (c *Conn) skip(n int64) error {
	var buf [256]byte
	for n > 0 {
		k, err := io.ReadFull(c.r, buf[:min(n, int64(len(buf)))])
		if err != nil {
			c.CloseNow()
			return ErrClosed
		}
		n -= int64(k)
	}
	return nil
}

// largePayload reads the payload of a frame that makes the message size
// bytes, over LargeMessage: with room for it from the budget, and within
// the read timeout.
func (c *Conn) largePayload(h ws.Header, msg []byte, size int64) ([]byte, error) {
	if c.budget != nil && size > c.held {
		if !c.budget.Reserve(size - c.held) {
			c.Close(StatusTryAgain, "the server is reading as many large messages as it may at once; try again")
			return nil, ErrClosed
		}
		c.held = size
	}
	if c.readTimeout <= 0 {
		return c.payload(h, msg)
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(c.readTimeout))
	msg, err := c.payload(h, msg)
	if err == nil && !c.ended.Load() { // a closed one's deadline is lingerLocked's
		_ = c.conn.SetReadDeadline(time.Time{})
	}
	return msg, err
}

// giveRoom gives back the room the message read held of the budget.
func (c *Conn) giveRoom() {
	if c.held > 0 {
		c.budget.Release(c.held)
		c.held = 0
	}
}

// payload reads a frame's payload, unmasked, after buf.
func (c *Conn) payload(h ws.Header, buf []byte) ([]byte, error) {
	at := len(buf)
	buf = slices.Grow(buf, int(h.Length))[:at+int(h.Length)]
	if _, err := io.ReadFull(c.r, buf[at:]); err != nil {
		c.CloseNow()
		return nil, ErrClosed
	}
	ws.Cipher(buf[at:], h.Mask, 0)
	return buf, nil
}
