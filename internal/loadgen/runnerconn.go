package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gobwas/ws"
)

// runnerConn is the client side of a runner's WebSocket connection, built
// as a client that streams fast would build it: frames are queued, and a
// writer of its own sends everything queued in one write, so that frames
// made while a write is under way (a runner answering a batch of acks
// with as many deltas) go out together, each still its own WebSocket
// message. The load generator shares the server's cores, so what its
// runners spend on system calls is taken from the server.
type runnerConn struct {
	conn net.Conn
	r    io.Reader

	mu     sync.Mutex
	out    bytes.Buffer // frames queued for the writer
	err    error        // why writing stopped
	closed bool
	kick   chan struct{} // capacity 1: the writer has frames to send

	rbuf []byte // Read's message buffer
}

// maxRunnerRead bounds one message the server sends a runner.
const maxRunnerRead = 1 << 20

// dialRunner opens a runner WebSocket at u (ws://…) with header h.
func dialRunner(ctx context.Context, u string, h http.Header) (*runnerConn, error) {
	conn, br, _, err := ws.Dialer{Header: ws.HandshakeHeaderHTTP(h), Timeout: 10 * time.Second}.Dial(ctx, u)
	if err != nil {
		var se ws.StatusError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("runner connection refused: HTTP %d", int(se))
		}
		return nil, err
	}
	c := &runnerConn{conn: conn, r: bufio.NewReaderSize(conn, 16<<10), kick: make(chan struct{}, 1)}
	if br != nil { // what the server sent after its handshake, already read
		c.r = io.MultiReader(br, c.r)
	}
	go c.writer()
	return c, nil
}

// WriteText queues p as one text message: masked, as a client's must be.
func (c *runnerConn) WriteText(p []byte) error {
	return c.queue(ws.OpText, p)
}

func (c *runnerConn) queue(op ws.OpCode, p []byte) error {
	c.mu.Lock()
	if c.err != nil || c.closed {
		err := c.err
		c.mu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return err
	}
	mask := ws.NewMask()
	_ = ws.WriteHeader(&c.out, ws.Header{Fin: true, OpCode: op, Masked: true, Mask: mask, Length: int64(len(p))})
	start := c.out.Len()
	c.out.Write(p)
	ws.Cipher(c.out.Bytes()[start:], mask, 0)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default: // the writer is already due to run
	}
	return nil
}

// writer sends what is queued, all of it in one write, until the
// connection is closed or a write fails.
func (c *runnerConn) writer() {
	var buf []byte
	for range c.kick {
		c.mu.Lock()
		buf = append(buf[:0], c.out.Bytes()...)
		c.out.Reset()
		closed := c.closed
		c.mu.Unlock()
		if len(buf) > 0 {
			_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.conn.Write(buf); err != nil {
				c.mu.Lock()
				c.err = err
				c.mu.Unlock()
				c.conn.Close()
				return
			}
		}
		if closed {
			return
		}
	}
}

// Read returns the next text or binary message from the server, answering
// pings; its bytes are valid until the next call.
func (c *runnerConn) Read() ([]byte, error) {
	msg := c.rbuf[:0]
	var inMessage bool
	for {
		h, err := ws.ReadHeader(c.r)
		if err != nil {
			return nil, err
		}
		if h.Length > maxRunnerRead || int64(len(msg))+h.Length > maxRunnerRead {
			return nil, fmt.Errorf("a message over %d bytes", maxRunnerRead)
		}
		if h.OpCode.IsControl() {
			p := make([]byte, h.Length)
			if _, err := io.ReadFull(c.r, p); err != nil {
				return nil, err
			}
			switch h.OpCode {
			case ws.OpPing:
				if err := c.queue(ws.OpPong, p); err != nil {
					return nil, err
				}
			case ws.OpClose:
				return nil, io.EOF
			}
			continue
		}
		if h.OpCode != ws.OpContinuation {
			if inMessage {
				return nil, errors.New("a new message before the last one ended")
			}
			inMessage = true
		}
		start := len(msg)
		msg = append(msg, make([]byte, h.Length)...)
		if _, err := io.ReadFull(c.r, msg[start:]); err != nil {
			return nil, err
		}
		if h.Masked {
			ws.Cipher(msg[start:], h.Mask, 0)
		}
		if h.Fin {
			c.rbuf = msg
			return msg, nil
		}
	}
}

// CloseNow closes the connection without a closing handshake.
func (c *runnerConn) CloseNow() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	c.conn.Close()
}
