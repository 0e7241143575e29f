// Command lint makes the checks of the repository that go vet, gofmt and
// staticcheck cannot: nothing that git tracks is a build output. It fails
// when a tracked file is an executable binary (an ELF file), or is larger
// than MaxFileBytes outside the folders that hold committed pictures
// (AllowLarge). `make lint` runs it from the repository's root.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// MaxFileBytes is the largest file that may be tracked outside AllowLarge:
// the biggest legitimate one (the generated GraphQL executor) is a tenth of
// it, and a Go binary of chargeonce is six times as large.
const MaxFileBytes = 5 << 20

// AllowLarge are the folders whose files may be of any size (they are
// pictures); an ELF file is refused there too.
var AllowLarge = []string{"web-demo/screenshots/"}

func main() {
	if err := run("."); err != nil {
		fmt.Fprintln(os.Stderr, "lint:", err)
		os.Exit(1)
	}
}

// run checks every file that git tracks in the work tree at root.
func run(root string) error {
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	var problems []string
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		problem, err := check(root, name)
		if err != nil {
			return err
		}
		if problem != "" {
			problems = append(problems, problem)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("build outputs are tracked; git rm --cached them and ignore them in .gitignore (make build writes bin/):\n  %s",
			strings.Join(problems, "\n  "))
	}
	return nil
}

// elfMagic starts every ELF file: executables, shared objects, object files.
var elfMagic = []byte{0x7f, 'E', 'L', 'F'}

// check says what is wrong with the tracked file name, or "" when nothing
// is. A file that is tracked but deleted from the work tree is no problem
// of this check.
func check(root, name string) (string, error) {
	f, err := os.Open(filepath.Join(root, name))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return "", err
	}
	head := make([]byte, len(elfMagic))
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	if bytes.Equal(head[:n], elfMagic) {
		return fmt.Sprintf("%s is an executable binary (ELF)", name), nil
	}
	if info.Size() > MaxFileBytes && !allowedLarge(name) {
		return fmt.Sprintf("%s is %.1f MB, more than the %d MB a source file may be", name,
			float64(info.Size())/(1<<20), MaxFileBytes>>20), nil
	}
	return "", nil
}

func allowedLarge(name string) bool {
	for _, dir := range AllowLarge {
		if strings.HasPrefix(name, dir) {
			return true
		}
	}
	return false
}
