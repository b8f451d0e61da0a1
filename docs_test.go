package parley_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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

// TestArchitectureNamesEveryPackage holds docs/architecture.md's table of
// rooms against the code: every Go package of the module has a row, and a
// row's "uses" names each package of the module the package imports (the
// root package aside, which every one may use).
func TestArchitectureNamesEveryPackage(t *testing.T) {
	text, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9/]+)/` \\|[^|]*\\| ([^|]*) \\|$")
	uses := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(text), -1) {
		uses[m[1]] = m[2]
	}
	const module = "github.com/parleyhq/parley/"
	reported := map[string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "." {
			return nil // the root: the first row
		}
		cell, ok := uses[dir]
		if !ok {
			t.Errorf("docs/architecture.md has no row for %s/", dir)
			uses[dir] = "reported" // once
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module) || cell == "everything below" || cell == "reported" {
				continue
			}
			name := p[strings.LastIndex(p, "/")+1:]
			if !strings.Contains(cell, "`"+name+"`") && !reported[dir+" "+p] {
				reported[dir+" "+p] = true
				t.Errorf("docs/architecture.md: %s/ imports %s, which its row's uses (%q) does not name", dir, strings.TrimPrefix(p, module), cell)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
