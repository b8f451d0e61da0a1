package protocols

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadA2ACards: the cards' file is read whole, and each mistake is
// named: not JSON, an id no agent can have, a skill without its id.
func TestReadA2ACards(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cards, err := ReadA2ACards(write("ok.json", `{"bob": {"name": "Bob", "description": "Counts.", "skills": [{"id": "math", "name": "Math", "description": "Sums", "tags": ["m"]}]}}`))
	if err != nil || cards["bob"].Name != "Bob" || cards["bob"].Skills[0].ID != "math" {
		t.Fatalf("cards %+v, err %v", cards, err)
	}
	for file, want := range map[string]string{
		write("bad.json", `[1]`):                                       "not a JSON object",
		write("id.json", `{"bad id": {"name": "x"}}`):                  `"bad id" is not an agent id`,
		write("skill.json", `{"bob": {"skills": [{"name": "Math"}]}}`): "agent bob: skills[0] needs an id and a name",
		filepath.Join(dir, "none.json"):                                "no such file",
	} {
		if _, err := ReadA2ACards(file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", file, err, want)
		}
	}
}
