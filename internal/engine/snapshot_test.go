package engine_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/reads"
)

// TestSnapshotIsBoundedInBytes: a snapshot summarizes every message over
// SnapshotMessageBytes (its summary says how large it is, and GET returns
// it whole); once its whole messages reach SnapshotBytes it leaves out
// older finished messages and summarizes older streaming ones, which are
// all there. So what it weighs is bounded whatever the messages hold.
func TestSnapshotIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	const perMessage, budget = 1500, 4000
	b := setup(t, engine.Options{SnapshotMessages: 10, SnapshotBytes: budget, SnapshotMessageBytes: perMessage})
	id := b.conversation(t, parley.PolicyFree)
	bot := conv.Actor{AgentID: "bot"}
	for _, s := range []struct {
		id   string
		text int
	}{{"s1", 100}, {"s2", 3000}} { // streaming since before the newest 10
		if _, err := b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: bot, ID: s.id, Role: parley.RoleAssistant, Streaming: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.eng.StreamText(b.ctx, id, conv.StreamText{Actor: bot, MessageID: s.id, Delta: strings.Repeat("s", s.text)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 {
		size := 300
		if i == 10 {
			size = 3000 // one large one among the newest
		}
		if _, err := b.eng.PostMessage(b.ctx, id, conv.PostMessage{Actor: bot, ID: fmt.Sprintf("f%02d", i), Role: parley.RoleAssistant, Parts: text(strings.Repeat("f", size))}); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := b.eng.Subscribe(b.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []string
	whole := 0
	for _, m := range sub.Init.Messages {
		full, err := reads.New(b.db, b.eng).Message(b.ctx, id, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		full.UpdatedSeq = m.UpdatedSeq // as of the snapshot
		raw, _ := json.Marshal(full)
		switch {
		case m.Summarized != nil:
			got = append(got, m.ID+"~")
			if m.Content != "" || len(m.Parts) != 0 || m.Summarized.Bytes != len(raw) || m.Status != full.Status || m.Seq != full.Seq {
				t.Fatalf("summary of %s: %+v; the message is %d bytes", m.ID, m, len(raw))
			}
		default:
			got = append(got, m.ID)
			whole += len(raw)
			if len(raw) > perMessage {
				t.Fatalf("%s is %d bytes in the snapshot, over %d", m.ID, len(raw), perMessage)
			}
		}
	}
	// The newest finished messages while the budget lasts (f10 summarized:
	// too large), the streaming ones summarized: the budget ran out.
	if want := "s1~ s2~ f06 f07 f08 f09 f10~ f11"; strings.Join(got, " ") != want {
		t.Fatalf("snapshot %v, want %s", got, want)
	}
	if whole > budget+perMessage {
		t.Fatalf("the snapshot's whole messages weigh %d bytes, over %d", whole, budget+perMessage)
	}
}
