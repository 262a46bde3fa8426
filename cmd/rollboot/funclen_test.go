package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds every function of the release binary, from its func line to
// its closing brace: a longer one mixes jobs that want names of their own.
const maxFuncLines = 80

// Every function compiled into the release flavour (the packages of this module
// that `go build -tags norollbootsim` links; the emulator, the demo and the
// invariant checker are left out) fits in maxFuncLines.
func TestNoLongFunctionsInRelease(t *testing.T) {
	const module = "github.com/rollboot/rollboot/"
	out, err := exec.Command("go", "list", "-deps", "-tags", "norollbootsim",
		"-f", `{{.ImportPath}}|{{.Dir}}|{{join .GoFiles ","}}`, module+"cmd/rollboot").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.SplitN(line, "|", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[0], module) || parts[2] == "" {
			continue
		}
		for _, name := range strings.Split(parts[2], ",") {
			path := filepath.Join(parts[1], name)
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("parse %s: %v", path, err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				checked++
				start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
				if n := end.Line - start.Line + 1; n > maxFuncLines {
					t.Errorf("%s:%d: %s is %d lines long, over %d: split it", strings.TrimPrefix(parts[0], module)+"/"+name, start.Line, fd.Name.Name, n, maxFuncLines)
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked only %d functions: the package listing looks wrong", checked)
	}
}
