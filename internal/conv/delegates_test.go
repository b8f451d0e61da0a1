package conv_test

import (
	"fmt"
	"testing"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/conv"
)

// TestDelegatesAreBounded: a turn takes at most Limits.MaxDelegates
// delegates (its owner's and theirs); one more is 409 busy, with the limit,
// writes nothing, and is taken again once the turn has closed. Delegating
// an agent already delegated still writes nothing and succeeds.
func TestDelegatesAreBounded(t *testing.T) {
	t.Parallel()
	sc := newScript(t, parley.PolicyFree)
	sc.env.Limits.MaxDelegates = 3
	sc.ok(say("a", parley.FinalityNone))
	sc.ok(conv.Delegate{Actor: actor("a"), To: "w1"})
	sc.ok(conv.Delegate{Actor: actor("w1"), To: "w2"})
	sc.ok(conv.Delegate{Actor: actor("a"), To: "w3"})
	for _, from := range []string{"a", "w2"} {
		_, err := sc.do(conv.Delegate{Actor: actor(from), To: "w4"})
		e, _ := err.(*parley.Error)
		if e == nil || e.Code != parley.EBUSY || e.Details["maxDelegates"] != 3 || e.Head == nil {
			t.Fatalf("a fourth delegate from %s: %v, want busy with maxDelegates 3 and the head", from, err)
		}
	}
	if d := sc.ok(conv.Delegate{Actor: actor("a"), To: "w2"}); len(d.Events) != 0 {
		t.Fatal("delegating w2 again wrote something")
	}
	sc.ok(say("a", parley.FinalityTurn))
	sc.ok(say("b", parley.FinalityNone))
	for i := range 3 {
		sc.ok(conv.Delegate{Actor: actor("b"), To: fmt.Sprintf("v%d", i)})
	}
}
