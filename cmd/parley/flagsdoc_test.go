package main

import (
	"flag"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServeFlagsAreDocumented: docs/operations.md has a row for every flag
// of parley serve, every row is a flag, and each row's default is the
// flag's.
func TestServeFlagsAreDocumented(t *testing.T) {
	for _, env := range []string{"PARLEY_DB", "PARLEY_ADDR", "PARLEY_POSTGRES_URL", "PARLEY_SQLITE_SYNC"} {
		t.Setenv(env, "") // unset: the defaults the page gives
	}
	checkFlagsDocumented(t, newServeMain(io.Discard).fs, "../../docs/operations.md", "parley serve", 10)
}

// checkFlagsDocumented checks the table of the page's "`cmd` flags"
// section against fs: a row for every flag, with its default, no row for
// a flag it does not take, no flag twice; fewer than minRows rows means
// the pattern no longer matches the table.
func checkFlagsDocumented(t *testing.T, fs *flag.FlagSet, page, cmd string, minRows int) {
	t.Helper()
	rows := flagRows(t, page, cmd, minRows)
	fs.VisitAll(func(f *flag.Flag) {
		def, ok := rows[f.Name]
		if !ok {
			t.Errorf("-%s has no row in %s", f.Name, page)
			return
		}
		delete(rows, f.Name)
		if msg := checkDocDefault(f, def); msg != "" {
			t.Errorf("-%s: %s gives the default %q: %s", f.Name, page, def, msg)
		}
	})
	for name := range rows {
		t.Errorf("%s has a row for -%s, which %s does not take", page, name, cmd)
	}
}

// flagRows reads the flags' table of the page's "`cmd` flags" section:
// each flag's name, with its default cell.
func flagRows(t *testing.T, page, cmd string, minRows int) map[string]string {
	t.Helper()
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(text), "\n## `"+cmd+"` flags\n")
	if !ok {
		t.Fatalf("%s has no section \"`%s` flags\"", page, cmd)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `-([a-z0-9-]+)` \\| ([^|]*) \\|")
	rows := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		if _, dup := rows[m[1]]; dup {
			t.Errorf("%s has two rows for -%s", page, m[1])
		}
		rows[m[1]] = strings.TrimSpace(m[2])
	}
	if len(rows) < minRows {
		t.Fatalf("%s: only %d rows found: the pattern no longer matches the table", page, len(rows))
	}
	return rows
}

// checkDocDefault says what is wrong with the default a row gives for f,
// or "". A default is a code span (`30s`, `7d`; a duration may be written
// shorter, `1m` for 1m0s), or "none" for a flag with no value by default;
// -max-conns's depends on the machine's open-file limit.
func checkDocDefault(f *flag.Flag, cell string) string {
	if f.Name == "max-conns" {
		if !strings.Contains(cell, "open-file limit") {
			return "want it to say it comes from the open-file limit"
		}
		return ""
	}
	if strings.HasPrefix(cell, "none") {
		if f.DefValue != "" && f.DefValue != "map[]" {
			return "the flag's is " + f.DefValue
		}
		return ""
	}
	m := regexp.MustCompile("^`([^`]*)`").FindStringSubmatch(cell)
	if m == nil {
		return "want a code span, or none"
	}
	if m[1] == f.DefValue {
		return ""
	}
	a, errA := time.ParseDuration(m[1])
	b, errB := time.ParseDuration(f.DefValue)
	if errA == nil && errB == nil && a == b {
		return ""
	}
	return "the flag's is " + f.DefValue
}
