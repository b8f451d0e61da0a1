package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/parleyhq/parley/client"
)

// One runner answers for an agent in every conversation it takes part in:
// here two chats, each asked one question.
func ExampleClient_ConnectAgentRunner() {
	ctx := context.Background()
	c := client.New(serverURL(), "")
	r, err := c.ConnectAgentRunner(ctx, "helper") // with an agent token, that agent's id
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	serving, stop := context.WithCancel(ctx)
	defer stop()
	go r.Serve(serving, client.HandlerFunc(func(ctx context.Context, rp *client.Reply) error {
		// rp.Prompt.ConversationID says which chat asks.
		return rp.Text(ctx, "You asked: "+rp.Prompt.Content)
	}))

	for _, question := range []string{"What is 6 x 7?", "And 7 x 8?"} {
		v, err := c.CreateConversation(ctx, client.NewConversation{Participants: []string{"helper"}, Members: []string{"human"}})
		if err != nil {
			log.Fatal(err)
		}
		p, err := c.QueuePrompt(ctx, v.Conversation.ID, client.NewPrompt{AgentID: "human", Content: question})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(answer(ctx, c, v.Conversation.ID, p.ID))
	}
	// Output:
	// You asked: What is 6 x 7?
	// You asked: And 7 x 8?
}
