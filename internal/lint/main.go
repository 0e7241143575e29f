// Command lint makes the checks of the repository that go vet, gofmt and
// staticcheck cannot. Nothing that git tracks is a build output: it fails
// when a tracked file is an executable binary (an ELF file), or is larger
// than MaxFileBytes outside the folders that hold committed pictures
// (AllowLarge). And only a store touches the queries that sqlc generates:
// it fails when a Go file imports one of the module's sqlc packages and is
// not a store's file (isStoreFile), so that sqlc's rows are turned into
// domain types in one place per package. And every relative link of a
// tracked Markdown file leads somewhere: to a tracked file, and to one of
// its headings when it names an anchor (checkLinks), so that a section
// moved from one document to another takes its links with it. `make lint`
// runs it from the repository's root.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
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
	module, err := modulePath(root)
	if err != nil {
		return err
	}
	tracked := map[string]bool{}
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if name != "" {
			tracked[name] = true
		}
	}
	var outputs, queries, links []string
	for _, name := range slices.Sorted(maps.Keys(tracked)) {
		problem, err := check(root, name)
		if err != nil {
			return err
		}
		if problem != "" {
			outputs = append(outputs, problem)
		}
		if problem, err = checkQueries(root, module, name); err != nil {
			return err
		}
		if problem != "" {
			queries = append(queries, problem)
		}
		broken, err := checkLinks(root, name, tracked)
		if err != nil {
			return err
		}
		links = append(links, broken...)
	}
	var errs []error
	if len(outputs) > 0 {
		errs = append(errs, fmt.Errorf("build outputs are tracked; git rm --cached them and ignore them in .gitignore (make build writes bin/):\n  %s",
			strings.Join(outputs, "\n  ")))
	}
	if len(queries) > 0 {
		errs = append(errs, fmt.Errorf("only a store touches the generated queries; move the code that needs them into the package's store (store*.go or *_store.go) and give the rest domain types:\n  %s",
			strings.Join(queries, "\n  ")))
	}
	if len(links) > 0 {
		errs = append(errs, fmt.Errorf("links lead nowhere; point them at the file or the heading that now holds what they name:\n  %s",
			strings.Join(links, "\n  ")))
	}
	return errors.Join(errs...)
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

// modulePath reads the module's path from root's go.mod; "" when there is
// none, and then no file imports a package of the module.
func modulePath(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(lines.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", lines.Err()
}

// checkQueries says which of the module's sqlc packages the tracked Go
// file name imports when it is not a store's file, or "" when it imports
// none or is one.
func checkQueries(root, module, name string) (string, error) {
	if module == "" || !strings.HasSuffix(name, ".go") || isStoreFile(name) {
		return "", nil
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, name), nil, parser.ImportsOnly)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(p, module+"/") && path.Base(p) == "sqlc" {
			return fmt.Sprintf("%s imports %s", name, p), nil
		}
	}
	return "", nil
}

// isStoreFile reports whether the Go file name is a store's, or a store's
// test: store.go, store_attempt.go, refund_store.go.
func isStoreFile(name string) bool {
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(name), ".go"), "_test")
	return slices.Contains(strings.Split(base, "_"), "store")
}
