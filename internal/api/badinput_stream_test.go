package api_test

// The bad-input suite's stream half: bad runner frames, bad resume
// positions, what stream clients send, and subscribers that never read.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/engine"
)

// runnerCase is one runner frame and the error code it must be answered with.
type runnerCase struct {
	name  string
	conn  *websocket.Conn
	frame string
	code  string
	bin   bool // send it as a binary frame
}

// TestBadRunnerFrames: every bad runner frame is answered with an error
// frame naming the documented code, writes nothing, and leaves the
// connection working; a frame over the limit closes the connection with 1009
// (message too big), writes nothing, and leaves other runners working.
func TestBadRunnerFrames(t *testing.T) {
	t.Parallel()
	f := newBadFixture(t)
	// alice streams r1 in c3 on one connection; the bad frames go over a
	// second connection of hers (which has no message of its own) and one
	// of bob's.
	live := f.runnerConn(f.c3, f.alice)
	for _, fr := range []string{`{"type":"message.create","turnId":"r1"}`, `{"type":"message.part.text-delta","turnId":"r1","delta":"hi"}`} {
		if ack := send(t, f.bundle, live, fr); ack["type"] != "ack" {
			t.Fatalf("%s answered %v", fr, ack)
		}
	}
	bad, bob := f.runnerConn(f.c3, f.alice), f.runnerConn(f.c3, f.bob)
	long := strings.Repeat("a", 129)
	cases := []runnerCase{
		{"malformed", bad, `{"type":`, "invalid_request", false},
		{"not JSON", bad, `hello`, "invalid_request", false},
		{"empty frame", bad, ``, "invalid_request", false},
		{"array", bad, `[{"type":"complete"}]`, "invalid_request", false},
		{"trailing garbage", bad, `{"type":"complete"} x`, "invalid_request", false},
		{"binary garbage", bad, "\x00\x01\xff", "invalid_request", true},
		{"unknown field", bad, `{"type":"message.create","turnId":"r9","colour":"red"}`, "invalid_request", false},
		{"wrong type of turnId", bad, `{"type":"message.create","turnId":9}`, "invalid_request", false},
		{"wrong type of args", bad, `{"type":"message.part.tool-update","turnId":"r1","callId":"c","toolName":"t","status":"running","args":{"a":}}`, "invalid_request", false},
		{"wrong type of messageIds", bad, `{"type":"reverted","messageIds":"r1"}`, "invalid_request", false},
		{"no type", bad, `{}`, "invalid_value", false},
		{"unknown type", bad, `{"type":"teleport"}`, "invalid_value", false},
		{"overlong turnId", bad, `{"type":"message.create","turnId":"` + long + `"}`, "invalid_value", false},
		{"malformed turnId", bad, `{"type":"message.create","turnId":"r 9"}`, "invalid_value", false},
		{"dot turnId", bad, `{"type":"message.create","turnId":"."}`, "invalid_value", false},
		{"dot-dot turnId", bad, `{"type":"message.create","turnId":".."}`, "invalid_value", false},
		{"dot-dot prompt id", bad, `{"type":"complete","messageId":".."}`, "invalid_value", false},
		{"reverted with a dot-dot id", bad, `{"type":"reverted","messageIds":[".."]}`, "invalid_value", false},
		{"malformed replyTo", bad, `{"type":"message.create","turnId":"r9","replyTo":"a b"}`, "invalid_thread", false},
		{"reply to an unknown message", bad, `{"type":"message.create","turnId":"r9","replyTo":"nope"}`, "invalid_thread", false},
		{"reply to another conversation", bad, `{"type":"message.create","turnId":"r9","replyTo":"x1"}`, "invalid_thread", false},
		{"self reply", bad, `{"type":"message.create","turnId":"r9","replyTo":"r9"}`, "invalid_thread", false},
		{"malformed retryOf", bad, `{"type":"message.create","turnId":"r9","retryOf":"r/1"}`, "invalid_value", false},
		{"malformed channel", bad, `{"type":"message.create","turnId":"r9","channelType":"a b","channelId":"c"}`, "invalid_value", false},
		{"taken id", bad, `{"type":"message.create","turnId":"r1"}`, "busy", false},
		{"delta for an unknown message", bad, `{"type":"message.part.text-delta","turnId":"nope","delta":"x"}`, "not_found", false},
		{"delta for a finished message", bad, `{"type":"message.part.text-delta","turnId":"x1","delta":"x"}`, "not_found", false},
		{"oversized delta", bad, `{"type":"message.part.text-delta","turnId":"r1","delta":"` + strings.Repeat("d", badTextLimit) + `"}`, "too_large", false},
		{"tool update over the message limit", bad, `{"type":"message.part.tool-update","turnId":"r1","callId":"c","toolName":"t","status":"running","args":"` + strings.Repeat("a", badSizeLimit) + `"}`, "too_large", false},
		{"error text over the message limit", bad, `{"type":"error","turnId":"r1","error":"` + strings.Repeat("e", badSizeLimit) + `"}`, "too_large", false},
		{"finalText over the text limit", bad, `{"type":"message.finalize","turnId":"r1","reason":"end_turn","finalText":"` + strings.Repeat("f", badTextLimit+1) + `"}`, "too_large", false},
		{"one streaming message too many", bad, `{"type":"message.create","turnId":"r8"}`, "busy", false},
		{"tool update for an unknown message", bad, `{"type":"message.part.tool-update","turnId":"nope","callId":"c","toolName":"t","status":"running"}`, "not_found", false},
		{"tool update without a call id", bad, `{"type":"message.part.tool-update","turnId":"r1","toolName":"t","status":"running"}`, "invalid_value", false},
		{"tool update with an overlong tool name", bad, `{"type":"message.part.tool-update","turnId":"r1","callId":"c","toolName":"` + long + `","status":"running"}`, "invalid_value", false},
		{"tool update with an unknown status", bad, `{"type":"message.part.tool-update","turnId":"r1","callId":"c","toolName":"t","status":"exploded"}`, "invalid_value", false},
		{"finalize an unknown message", bad, `{"type":"message.finalize","turnId":"nope","reason":"end_turn"}`, "not_found", false},
		{"finalize with an unknown reason", bad, `{"type":"message.finalize","turnId":"r1","reason":"bored"}`, "invalid_value", false},
		{"finalize with an unknown finality", bad, `{"type":"message.finalize","turnId":"r1","reason":"end_turn","finality":"forever"}`, "invalid_value", false},
		{"malformed prompt id", bad, `{"type":"complete","messageId":"a b"}`, "invalid_value", false},
		{"error with no message", bad, `{"type":"error","error":"boom"}`, "not_found", false},
		{"state of an unknown message", bad, `{"type":"message.state","turnId":"nope"}`, "not_found", false},
		{"reverted with a malformed id", bad, `{"type":"reverted","messageIds":["a b"]}`, "invalid_value", false},
		{"reverted naming no message there is", bad, `{"type":"reverted","messageIds":["nope"]}`, "not_found", false},
		{"reverted naming many, none there", bad, `{"type":"reverted","messageIds":["` + strings.Join(manyIDs(engine.MaxRevertIDs), `","`) + `"]}`, "not_found", false},
		{"reverted with too many ids", bad, `{"type":"reverted","messageIds":["` + strings.Join(manyIDs(engine.MaxRevertIDs+1), `","`) + `"]}`, "too_large", false},
		{"reverted naming one id too often", bad, `{"type":"reverted","messageIds":["` + strings.Repeat(`r1","`, engine.MaxRevertIDs) + `r1"]}`, "too_large", false},
		{"another agent's delta", bob, `{"type":"message.part.text-delta","turnId":"r1","delta":"x"}`, "forbidden", false},
		{"another agent's finalize", bob, `{"type":"message.finalize","turnId":"r1","reason":"end_turn"}`, "forbidden", false},
		{"another agent's aborted", bob, `{"type":"aborted","turnId":"r1"}`, "forbidden", false},
		{"another agent's state", bob, `{"type":"message.state","turnId":"r1"}`, "forbidden", false},
	}
	before := f.snapshot()
	for _, c := range cases {
		typ := websocket.MessageText
		if c.bin {
			typ = websocket.MessageBinary
		}
		if err := c.conn.Write(f.ctx, typ, []byte(c.frame)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		reply := readFrame(t, f.ctx, c.conn)
		e, _ := reply["error"].(map[string]any)
		if reply["type"] != "error" || e["code"] != c.code || e["message"] == "" {
			t.Errorf("%s: %.200s answered %v, want an error frame with code %s", c.name, c.frame, reply, c.code)
		}
		if after := f.snapshot(); after != before {
			t.Fatalf("%s: a refused frame wrote something:\nbefore %s\nafter  %s", c.name, before, after)
		}
	}
	// Frames that name nothing change nothing and are acknowledged so.
	for _, fr := range []string{`{"type":"complete"}`, `{"type":"aborted"}`, `{"type":"aborted","turnId":"nope"}`} {
		if ack := send(t, f.bundle, bad, fr); ack["type"] != "ack" || ack["seq"] != 0.0 {
			t.Errorf("%s answered %v, want an ack of seq 0", fr, ack)
		}
	}
	// A frame over 1 MiB closes the connection with 1009.
	huge := `{"type":"message.part.text-delta","turnId":"r1","delta":"` + strings.Repeat("h", 1<<20) + `"}`
	werr := bad.Write(f.ctx, websocket.MessageText, []byte(huge))
	_, _, rerr := bad.Read(f.ctx)
	if websocket.CloseStatus(rerr) != websocket.StatusMessageTooBig {
		t.Fatalf("an oversized frame: write %v, read %v; want a close with 1009", werr, rerr)
	}
	if after := f.snapshot(); after != before {
		t.Fatalf("an oversized frame wrote something:\nbefore %s\nafter  %s", before, after)
	}
	// The other runners carry on.
	if ack := send(t, f.bundle, live, `{"type":"message.part.text-delta","turnId":"r1","delta":" there"}`); ack["type"] != "ack" {
		t.Fatalf("after the bad frames, a good one answered %v", ack)
	}
	if reply := send(t, f.bundle, bob, `{"type":"teleport"}`); reply["type"] != "error" {
		t.Fatalf("bob's connection: %v", reply)
	}
}

// manyIDs returns n distinct well-formed message ids that name nothing.
func manyIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%06d", i)
	}
	return ids
}

// dialError dials a stream that must be refused before the upgrade and
// returns the status and the error code of the answer. It sends the
// viewer's token unless the path has a token of its own.
func (b *bundle) dialError(path string, header ...string) (int, string) {
	b.t.Helper()
	h := http.Header{"Authorization": {"Bearer " + b.viewer}}
	if strings.Contains(path, "token=") {
		h = http.Header{}
	}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	c, resp, err := websocket.Dial(b.ctx, "ws"+strings.TrimPrefix(b.url, "http")+path, &websocket.DialOptions{HTTPHeader: h})
	if err == nil {
		c.CloseNow()
		b.t.Fatalf("dial %s: accepted, want a refusal", path)
	}
	if resp == nil {
		b.t.Fatalf("dial %s: %v", path, err)
	}
	return resp.StatusCode, errorCode(resp)
}

// errorCode reads the code of an error answer.
func errorCode(resp *http.Response) string {
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &body)
	return body.Error.Code
}

// staleEpoch returns a well-formed epoch other than epoch: one of another
// history.
func staleEpoch(epoch string) string {
	if epoch == "00000000" {
		return "11111111"
	}
	return "00000000"
}

// TestBadResumePositions: a resume position is read exactly as the server
// writes it: Last-Event-ID is "<epoch>:<seq>" and ?after=SEQ[&epoch=E],
// where an epoch is 8 characters of 0-9 a-f and a seq is digits without
// sign or leading zeros that fit in 64 bits. Anything else, a parameter
// given twice or an epoch without after, is 400 invalid_request on both
// transports before any stream starts; a well-formed position in another
// epoch or ahead of the log gets init with recovered false and a snapshot.
func TestBadResumePositions(t *testing.T) {
	t.Parallel()
	f := newBadFixture(t)
	before := f.snapshot()
	epoch := f.do("GET", "/v1/conversations/"+f.c, f.viewer, nil).body["head"].(map[string]any)["epoch"].(string)
	stale := staleEpoch(epoch)
	bad := []struct{ query, lastEventID string }{
		{"?after=x", ""}, {"?after=-1", ""}, {"?after=1.5", ""}, {"?after=%201", ""}, {"?after=0x10", ""},
		{"?after=99999999999999999999", ""}, {"?after=-0x1&epoch=" + epoch, ""},
		{"?after=", ""}, {"?after=+5", ""}, {"?after=05", ""}, {"?after=00", ""}, {"?after=-0", ""}, {"?after=5%20", ""},
		{"?after=1&after=2", ""}, {"?epoch=" + epoch, ""}, {"?after=1&epoch=", ""}, {"?after=1&epoch=stale", ""},
		{"?after=1&epoch=" + strings.ToUpper(epoch) + "X", ""}, {"?after=1&epoch=" + epoch + "0", ""},
		{"?after=1&epoch=" + epoch[:7], ""}, {"?after=1&epoch=" + epoch + "&epoch=" + epoch, ""},
		{"?after=1&epoch=ABCDEF12", ""}, {"?after=1&epoch=0000000g", ""},
		{"", "garbage"}, {"", epoch + ":-1"}, {"", epoch + ":"}, {"", epoch + ":x"}, {"", epoch + ":1:"},
		{"", ":5"}, {"", "E:+5"}, {"", "E:05"}, {"", "E:5:6"}, {"", epoch + ":+5"}, {"", epoch + ":05"},
		{"", epoch + ":5:6"}, {"", epoch + ": 5"}, {"", epoch + ":5\t6"},
		{"", epoch + ":99999999999999999999"}, {"", "stale:2"}, {"", epoch + "0:2"}, {"", "5"},
		{"?after=3", epoch + ":nope"}, // Last-Event-ID wins, and it is bad
		{"?after=x", epoch + ":3"},    // Last-Event-ID wins, but the query is bad too
	}
	for _, c := range bad {
		hdr := []string{}
		if c.lastEventID != "" {
			hdr = []string{"Last-Event-ID", c.lastEventID}
		}
		// A stream that starts is not read: its status says enough.
		_, resp := f.openSSE(f.c, c.query, hdr...)
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		if resp.StatusCode != 200 {
			_ = json.NewDecoder(resp.Body).Decode(&body)
		}
		if resp.StatusCode != 400 || body.Error.Code != "invalid_request" {
			t.Errorf("sse %q %q: %d %q, want 400 invalid_request", c.query, c.lastEventID, resp.StatusCode, body.Error.Code)
			continue
		}
		if st, code := f.dialError("/v1/conversations/"+f.c+"/ws"+c.query, hdr...); st != 400 || code != "invalid_request" {
			t.Errorf("ws %q %q: %d %q, want 400 invalid_request", c.query, c.lastEventID, st, code)
		}
	}
	// Two Last-Event-ID headers are as ambiguous as two afters.
	req, _ := http.NewRequestWithContext(f.ctx, "GET", f.url+"/v1/conversations/"+f.c+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+f.viewer)
	req.Header.Add("Last-Event-ID", epoch+":1")
	req.Header.Add("Last-Event-ID", epoch+":2")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Error(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("two Last-Event-ID headers: %d, want 400", resp.StatusCode)
		}
	}
	if st, code := f.dialError("/v1/conversations/nope/ws?after=0"); st != 404 || code != "not_found" {
		t.Errorf("ws of an unknown conversation: %d %q", st, code)
	}
	if st, code := f.dialError("/v1/conversations/" + f.c + "/ws?token=pk_nope"); st != 401 || code != "unauthorized" {
		t.Errorf("ws with a bad token: %d %q", st, code)
	}
	// Another epoch, or a seq past the end: a snapshot, not a resume.
	last := f.lastSeq(f.c)
	fresh := []struct{ query, lastEventID string }{
		{"?after=2&epoch=" + stale, ""}, {"?after=999&epoch=" + epoch, ""}, {"?after=999", ""},
		{"", stale + ":2"}, {"", epoch + ":999"}, {"", epoch + ":9223372036854775807"},
	}
	for _, c := range fresh {
		check := func(transport string, in map[string]any) {
			pos, _ := in["position"].(map[string]any)
			msgs, _ := in["messages"].([]any)
			if in["type"] != "init" || in["recovered"] != false || pos["seq"] != last || pos["epoch"] != epoch || len(msgs) != 3 {
				t.Errorf("%s %q %q: init = %v", transport, c.query, c.lastEventID, in)
			}
		}
		var hdr []string
		if c.lastEventID != "" {
			hdr = []string{"Last-Event-ID", c.lastEventID}
		}
		next, _ := f.openSSE(f.c, c.query, hdr...)
		check("sse", next().data)
		if c.lastEventID == "" {
			ws := f.dialWS(f.c, c.query)
			check("ws", readFrame(t, f.ctx, ws))
			ws.CloseNow()
		}
	}
	// The positions the server writes resume, "0" included.
	for _, c := range []struct{ query, lastEventID string }{{"?after=0", ""}, {"?after=0&epoch=" + epoch, ""}, {"", epoch + ":0"}, {"", epoch + ":1"}} {
		var hdr []string
		if c.lastEventID != "" {
			hdr = []string{"Last-Event-ID", c.lastEventID}
		}
		next, _ := f.openSSE(f.c, c.query, hdr...)
		if in := next().data; in["type"] != "init" || in["recovered"] != true {
			t.Errorf("sse %q %q: init = %v, want a resume", c.query, c.lastEventID, in)
		}
	}
	if after := f.snapshot(); after != before {
		t.Fatalf("bad positions wrote something")
	}
}

// TestClientWebSocketFrames: what a stream client sends is read and
// discarded, text or binary, JSON or not, and the stream carries on; a
// message over 32 KiB closes the connection with 1009 (within a heartbeat:
// a stream reads what its client sends between its own writes). Nothing
// is written.
func TestClientWebSocketFrames(t *testing.T) {
	t.Parallel()
	f := newBadFixtureWith(t, api.Options{HeartbeatInterval: 100 * time.Millisecond})
	c := f.dialWS(f.c3, "")
	// The client reads all along: it answers the server's pings (one each
	// heartbeat while the stream is idle) only while it reads, and a ping
	// left unanswered for a heartbeat ends the stream, however slow the
	// machine is.
	type read struct {
		data []byte
		err  error
	}
	reads := make(chan read, 16)
	go func() {
		for {
			_, data, err := c.Read(f.ctx)
			reads <- read{data, err}
			if err != nil {
				return
			}
		}
	}()
	next := func() map[string]any {
		t.Helper()
		r := <-reads
		if r.err != nil {
			t.Fatalf("ws read: %v", r.err)
		}
		var fr map[string]any
		if err := json.Unmarshal(r.data, &fr); err != nil {
			t.Fatal(err)
		}
		return fr
	}
	if in := next(); in["type"] != "init" {
		t.Fatalf("init = %v", in)
	}
	before := f.snapshot()
	for i, fr := range []string{`{"type":"message.create","turnId":"w1"}`, `{"type":"subscribe","after":0}`, `{"type":`, "\x00\xff", "", strings.Repeat("z", 30<<10)} {
		typ := websocket.MessageText
		if i%2 == 1 {
			typ = websocket.MessageBinary
		}
		if err := c.Write(f.ctx, typ, []byte(fr)); err != nil {
			t.Fatal(err)
		}
	}
	if after := f.snapshot(); after != before {
		t.Fatal("client frames wrote something")
	}
	// Had the server's read loop given up, the stream would have ended.
	f.post(f.c3, f.alice, "still streaming", "none")
	if ev := next(); ev["seq"] != 2.0 || ev["type"] != "message" {
		t.Fatalf("after client frames the stream sent %v", ev)
	}
	if err := c.Write(f.ctx, websocket.MessageText, bytes.Repeat([]byte("z"), 33<<10)); err != nil {
		t.Fatal(err)
	}
	for {
		r := <-reads
		if r.err != nil {
			if websocket.CloseStatus(r.err) != websocket.StatusMessageTooBig {
				t.Fatalf("after a message over 32 KiB: %v, want a close with 1009", r.err)
			}
			break
		}
	}
}

// frameSeq returns an event frame's seq, or 0 for init, guidance and error.
func frameSeq(f map[string]any) int64 {
	if f["type"] == "init" || f["type"] == "guidance" || f["type"] == "error" {
		return 0
	}
	s, _ := f["seq"].(float64)
	return int64(s)
}

// errUnexpectedFrame reports a frame a stream should not have sent.
var errUnexpectedFrame = errors.New("unexpected frame")

// follow reads frames with next until the context ends or next fails, and
// sends each event's seq on seqs (large enough never to block); the first
// frame must be an init resuming from 0.
func follow(ctx context.Context, next func() (map[string]any, error), seqs chan<- int64) error {
	in, err := next()
	if err != nil {
		return err
	}
	if in["type"] != "init" || in["recovered"] != true {
		return fmt.Errorf("%w: first frame %v", errUnexpectedFrame, in)
	}
	for ctx.Err() == nil {
		fr, err := next()
		if err != nil {
			return err
		}
		if fr["type"] == "error" {
			return fmt.Errorf("%w: %v", errUnexpectedFrame, fr)
		}
		if s := frameSeq(fr); s > 0 {
			seqs <- s
		}
	}
	return ctx.Err()
}
