package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Markdown links: a link or an image, [text](target) or [text](target
// "title"), whose target has no spaces.
var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	mdHeading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	mdScheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	codeSpan  = regexp.MustCompile("`[^`]*`")
)

// checkLinks says which relative links of the tracked Markdown file name
// lead nowhere: to a path that git does not track, or to an anchor that
// is none of the target's headings. Links inside code are not links.
func checkLinks(root, name string, tracked map[string]bool) ([]string, error) {
	if !strings.HasSuffix(name, ".md") {
		return nil, nil
	}
	doc, err := os.ReadFile(filepath.Join(root, name))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, line := range prose(string(doc)) {
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if mdScheme.MatchString(target) {
				continue // a URL: not this repository's to check
			}
			file, anchor, _ := strings.Cut(target, "#")
			to := name
			if file != "" {
				to = path.Clean(path.Join(path.Dir(name), file))
			}
			switch {
			case !tracked[to] && !trackedDir(tracked, to):
				problems = append(problems, fmt.Sprintf("%s links to %s, which is not in the repository", name, target))
			case anchor != "" && strings.HasSuffix(to, ".md"):
				headings, err := anchors(root, to)
				if err != nil {
					return nil, err
				}
				if !headings[anchor] {
					problems = append(problems, fmt.Sprintf("%s links to %s, but %s has no heading #%s", name, target, to, anchor))
				}
			}
		}
	}
	return problems, nil
}

// prose is doc's lines outside fenced code blocks.
func prose(doc string) []string {
	var lines []string
	fence := ""
	for line := range strings.Lines(doc) {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
		case strings.HasPrefix(trimmed, "```"), strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
		default:
			lines = append(lines, line)
		}
	}
	return lines
}

// anchors are the ids that GitHub gives the headings of the Markdown file
// name: the text in lower case, without punctuation, spaces as hyphens,
// and -1, -2, … after a repeated one.
func anchors(root, name string) (map[string]bool, error) {
	doc, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, line := range prose(string(doc)) {
		m := mdHeading.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		id := slug(m[1])
		unique := id
		for n := 1; ids[unique]; n++ {
			unique = fmt.Sprintf("%s-%d", id, n)
		}
		ids[unique] = true
	}
	return ids, nil
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// trackedDir reports whether dir holds a tracked file.
func trackedDir(tracked map[string]bool, dir string) bool {
	for name := range tracked {
		if strings.HasPrefix(name, dir+"/") {
			return true
		}
	}
	return false
}
