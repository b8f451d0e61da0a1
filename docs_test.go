package parley_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docPath is a path of this repository as the docs quote it: `internal/api/`,
// `client/runner.go`, `e2e/chaos_test.go`.
var docPath = regexp.MustCompile("`((?:internal|client|cmd|e2e|web|examples|scripts|docs)/[^` ]*)`")

// TestDocsNameFilesThatExist reads the README and every page of docs/ and
// checks that each file or folder they quote by its path is there, so that
// moving code without mending what names it fails here.
func TestDocsNameFilesThatExist(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "README.md", "BENCHMARKS.md", "CONTRIBUTING.md")
	checked := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if os.IsNotExist(err) && page == "CONTRIBUTING.md" {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docPath.FindAllStringSubmatch(string(text), -1) {
			p := strings.TrimSuffix(m[1], "/")
			if strings.ContainsAny(p, "*{}<>$") { // a pattern, not one path
				continue
			}
			checked++
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s names %s, which is not in the repository", page, m[1])
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d paths found in the docs: the pattern no longer matches how they quote paths", checked)
	}
}
