package deploy

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Every file of the folders setup applies is embedded, and the embedded copy
// is the file: a new policy or job file cannot be left out of the binary.
func TestEmbedsEveryDeployFile(t *testing.T) {
	for _, pattern := range []string{"acl/*.policy.hcl", "nomad/*.nomad.hcl", "policy.hcl", "systemd/*"} {
		paths, err := filepath.Glob(pattern)
		if err != nil || len(paths) == 0 {
			t.Fatalf("%s: %v (no files)", pattern, err)
		}
		for _, p := range paths {
			disk, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			emb, err := Read(filepath.ToSlash(p))
			if err != nil {
				t.Errorf("%s is not embedded: %v", p, err)
				continue
			}
			if !bytes.Equal(disk, emb) {
				t.Errorf("%s: the embedded copy differs from the file", p)
			}
		}
	}
	n := 0
	_ = fs.WalkDir(Files, ".", func(_ string, d fs.DirEntry, _ error) error {
		if !d.IsDir() {
			n++
		}
		return nil
	})
	if n == 0 {
		t.Error("nothing embedded")
	}
}
