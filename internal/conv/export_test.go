package conv

// ReadHead exposes readHead to the tests: the fields it reads, in order
// id, status, next, agentId, finality.
func ReadHead(data []byte) [5]string {
	h := readHead(data)
	return [5]string{h.ID, string(h.Status), h.Next, h.AgentID, string(h.Finality)}
}
