package api

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/runners"
)

// keptFrames is an applier that keeps what each frame handed it, as a
// queued command does: the frame's strings and its args.
type keptFrames struct {
	deltas []string
	args   [][]byte
	ids    [][]string
}

func (k *keptFrames) Submit(_ context.Context, f *runners.Frame) *engine.Ack {
	k.deltas = append(k.deltas, f.Delta)
	k.args = append(k.args, f.Args)
	k.ids = append(k.ids, f.MessageIDs)
	return engine.Acked(nil, nil)
}

// TestRunnerFramesShareNoBytes checks that the frames of one connection,
// parsed into the same Frame one after another, hand the applier values
// that the next frame does not overwrite: what a queued delta or tool
// update keeps must stay as it was sent.
func TestRunnerFramesShareNoBytes(t *testing.T) {
	frames := []string{
		`{"type":"message.part.tool-update","turnId":"r1","callId":"c1","toolName":"t","status":"running","args":{"q":"first args"}}`,
		`{"type":"message.part.text-delta","turnId":"r1","delta":"one"}`,
		`{"type":"message.part.tool-update","turnId":"r1","callId":"c1","status":"running","args":{"q":"later"}}`,
		`{"type":"reverted","messageIds":["m1","m2"]}`,
		`{"type":"reverted","messageIds":["xx"]}`,
		`{"type":"message.part.text-delta","turnId":"r1","delta":"two"}`,
	}
	k := &keptFrames{}
	var f runners.Frame
	for _, s := range frames {
		data := []byte(s)
		runnerReply(context.Background(), k, data, &f)
		clear(data) // the connection's read buffer is reused
	}
	if want := []string{"", "one", "", "", "", "two"}; !slices.Equal(k.deltas, want) {
		t.Errorf("deltas kept: %q; want %q", k.deltas, want)
	}
	if string(k.args[0]) != `{"q":"first args"}` || string(k.args[2]) != `{"q":"later"}` {
		t.Errorf("args kept: %s, %s", k.args[0], k.args[2])
	}
	if !slices.Equal(k.ids[3], []string{"m1", "m2"}) || !slices.Equal(k.ids[4], []string{"xx"}) {
		t.Errorf("message ids kept: %q, %q", k.ids[3], k.ids[4])
	}
	if f.Type != "" || f.Delta != "" || f.Args != nil {
		t.Errorf("the connection's frame still holds the last one: %+v", f)
	}
}

// TestAckFramesAppended checks that an answer appended to a buffer already
// holding another is that answer as encoding/json writes it, after what the
// buffer held: the connection's writer makes every ack in one buffer.
func TestAckFramesAppended(t *testing.T) {
	for _, c := range []struct {
		head replyHead
		err  error
		want map[string]any
	}{
		{replyHead{typ: "message.part.text-delta", turnID: `r"1`}, nil, map[string]any{"type": "ack", "turnId": `r"1`, "seq": 42}},
		{replyHead{typ: "message.part.text-delta", turnID: "r1", conversationID: "c<1>"}, nil, map[string]any{"type": "ack", "turnId": "r1", "seq": 42, "conversationId": "c<1>"}},
		{replyHead{typ: "message.part.tool-update", turnID: "r1"}, parley.Errorf(parley.ETOOLARGE, "too big"),
			map[string]any{"type": "error", "turnId": "r1", "error": map[string]any{"code": parley.ETOOLARGE, "message": "too big"}}},
	} {
		before := []byte(`{"type":"ack","seq":1}`)
		got := appendReplyFrame(before, c.head, &engine.MessageResult{Seq: 42}, c.err)
		want, _ := json.Marshal(c.want)
		if string(got) != string(before)+string(want) {
			t.Errorf("appended %s; want %s%s", got, before, want)
		}
	}
}
