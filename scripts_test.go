package parley_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryStoreRunCoversItsPackages: the packages whose tests choose
// their store with internal/teststore run on SQLite by default; the test
// command runs them again on PostgreSQL (PARLEY_TEST_STORE=postgres), once
// as they are and once under the race detector. Each such package must be
// named in both runs, or moving tests into a new package quietly stops
// running them on PostgreSQL.
func TestEveryStoreRunCoversItsPackages(t *testing.T) {
	script, err := os.ReadFile("scripts/test")
	if err != nil {
		t.Fatal(err)
	}
	runs := regexp.MustCompile(`(?m)^\s*PARLEY_TEST_STORE=postgres go test .*$`).FindAllString(string(script), -1)
	if len(runs) != 2 {
		t.Fatalf("scripts/test has %d PostgreSQL runs of the store-choosing tests, want 2 (as they are, and -race)", len(runs))
	}
	var uses []string
	err = filepath.WalkDir("internal", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir := "./" + filepath.ToSlash(filepath.Dir(path))
		if strings.Contains(string(text), `"github.com/parleyhq/parley/internal/teststore"`) && (len(uses) == 0 || uses[len(uses)-1] != dir) {
			uses = append(uses, dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(uses) < 3 {
		t.Fatalf("only %v use internal/teststore: the search no longer finds them", uses)
	}
	for _, dir := range uses {
		for _, run := range runs {
			if !strings.Contains(run+" ", " "+dir+" ") {
				t.Errorf("%s chooses its store with internal/teststore, but this run of scripts/test leaves it out: %s", dir, strings.TrimSpace(run))
			}
		}
	}
}
