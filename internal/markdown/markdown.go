// Package markdown writes the documents that chargeonce's runs generate:
// results files, and the parts of a document (docs/performance.md, the
// chaos run's figures) between a pair of HTML comment markers.
package markdown

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ReplaceMarked returns doc with what lies between the begin and end
// markers replaced by content, and everything else as it was.
func ReplaceMarked(doc, begin, end, content string) (string, error) {
	if strings.Count(doc, begin) != 1 || strings.Count(doc, end) != 1 {
		return "", fmt.Errorf("want one %s and one %s marker", begin, end)
	}
	i, j := strings.Index(doc, begin)+len(begin), strings.Index(doc, end)
	if j < i {
		return "", errors.New(end + " comes before " + begin)
	}
	return doc[:i] + "\n" + strings.TrimSpace(content) + "\n" + doc[j:], nil
}

// UpdateFile rewrites what lies between the markers in the file at path.
func UpdateFile(path, begin, end, content string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := ReplaceMarked(string(doc), begin, end, content)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

// WriteResults writes a run's results into dir: v as results.json, and md
// as results.md.
func WriteResults(dir string, v any, md string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(md), 0o644)
}
