package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/routes"
)

// apiDoc is the HTTP API reference the examples are read from.
const apiDoc = "../../docs/api.md"

// TestDocumentedExamples holds docs/api.md to the handlers. Every example
// in it — a **Request** line, with a fenced JSON body when it has one,
// then a **Reply** line with the status (and any headers) and a fenced
// body — is sent in document order through the API as `queen serve`
// builds it, on a fresh database. Each reply must answer the documented
// status and carry exactly the documented fields (no field missing, none
// undocumented), with the same JSON types, recursively. Booleans and
// strings must match exactly (error messages too); numbers only by type;
// UUIDs and timestamps only by form. A documented UUID stands for the real one it first meets
// in a reply: later requests use the real one, and it must stand for the
// same value wherever it appears again (so the examples agree with each
// other on which partition, lease or message they mean). Every route of
// the route table has a heading and at least one example.
func TestDocumentedExamples(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	examples, err := parseExamples(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(examples) == 0 {
		t.Fatal("docs/api.md has no examples")
	}

	mux := http.NewServeMux()
	for _, rt := range routes.Table {
		mux.HandleFunc(rt.Pattern(), func(http.ResponseWriter, *http.Request) {})
		if !hasRouteHeading(doc, rt.Pattern()) {
			t.Errorf("docs/api.md has no heading naming `%s`", rt.Pattern())
		}
	}
	covered := map[string]bool{}

	s := newServer(t)
	m := newDocMatcher()
	for _, ex := range examples {
		target, body := m.substitute(ex.target), m.substitute(ex.body)
		_, pattern := mux.Handler(httptest.NewRequest(ex.method, target, nil))
		if pattern == "" {
			t.Errorf("line %d: %s %s is no route of the route table", ex.line, ex.method, ex.target)
			continue
		}
		covered[pattern] = true
		var sent any
		if body != "" {
			sent = body
		}
		r := s.do(ex.method, target, sent)
		if errs := m.check(ex, r); len(errs) > 0 {
			t.Errorf("docs/api.md line %d: %s %s:\n\t%s\nthe real reply (%d), with the documented UUIDs:\n%s",
				ex.line, ex.method, ex.target, strings.Join(errs, "\n\t"), r.status, m.document(indentJSON(r.body)))
		}
	}
	for _, rt := range routes.Table {
		if !covered[rt.Pattern()] {
			t.Errorf("docs/api.md has no example of %s", rt.Pattern())
		}
	}
}

// example is one documented request and its reply.
type example struct {
	line           int    // the request's line in the document
	method, target string // "POST", "/api/v1/push"
	body           string // the request body; "" for none
	status         int
	headers        map[string]string // documented reply headers
	replyKind      string            // the reply's fence: "json", "text", or "" for no body
	reply          string
}

var (
	requestLine = regexp.MustCompile("^\\*\\*Request\\*\\* `([A-Z]+) ([^` ]+)`")
	replyLine   = regexp.MustCompile("^\\*\\*Reply\\*\\* `(\\d{3})`(.*)$")
	headerSpan  = regexp.MustCompile("`([A-Za-z-]+): ([^`]*)`")
)

// parseExamples reads the examples of doc: a line starting
// "**Request** `METHOD /path?query`", optionally followed by a fenced
// block with the body, then a line "**Reply** `STATUS`", optionally with
// headers as further code spans ("`Retry-After: 30`"), then optionally a
// fenced block with the reply body (```json, or ```text for a reply that
// is not JSON).
func parseExamples(doc string) ([]example, error) {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(doc))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	// fence reads the fenced block starting at the next non-blank line
	// after i, if there is one: its info string, its text and the index
	// of its closing line.
	fence := func(i int) (info, text string, end int, ok bool) {
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j >= len(lines) || !strings.HasPrefix(lines[j], "```") {
			return "", "", i, false
		}
		info = strings.TrimSpace(strings.TrimPrefix(lines[j], "```"))
		for k := j + 1; k < len(lines); k++ {
			if strings.HasPrefix(lines[k], "```") {
				return info, strings.Join(lines[j+1:k], "\n"), k, true
			}
		}
		return "", "", i, false
	}
	var out []example
	var cur *example
	for i := 0; i < len(lines); i++ {
		if m := requestLine.FindStringSubmatch(lines[i]); m != nil {
			if cur != nil {
				return nil, fmt.Errorf("docs/api.md line %d: a request without a reply", cur.line)
			}
			cur = &example{line: i + 1, method: m[1], target: m[2]}
			if info, text, end, ok := fence(i); ok {
				if info != "json" {
					return nil, fmt.Errorf("docs/api.md line %d: a request body must be a ```json block", i+1)
				}
				if !json.Valid([]byte(text)) {
					return nil, fmt.Errorf("docs/api.md line %d: the request body is not JSON", i+1)
				}
				cur.body, i = text, end
			}
			continue
		}
		m := replyLine.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("docs/api.md line %d: a reply without a request", i+1)
		}
		cur.status, _ = strconv.Atoi(m[1])
		cur.headers = map[string]string{}
		for _, h := range headerSpan.FindAllStringSubmatch(m[2], -1) {
			cur.headers[h[1]] = h[2]
		}
		if info, text, end, ok := fence(i); ok {
			switch info {
			case "json":
				if !json.Valid([]byte(text)) {
					return nil, fmt.Errorf("docs/api.md line %d: the reply is not JSON", i+1)
				}
			case "text":
			default:
				return nil, fmt.Errorf("docs/api.md line %d: a reply body must be a ```json or ```text block", i+1)
			}
			cur.replyKind, cur.reply, i = info, text, end
		}
		out = append(out, *cur)
		cur = nil
	}
	if cur != nil {
		return nil, fmt.Errorf("docs/api.md line %d: a request without a reply", cur.line)
	}
	return out, nil
}

// hasRouteHeading reports whether a heading of doc (outside fenced
// blocks) names pattern in a code span.
func hasRouteHeading(doc, pattern string) bool {
	fenced := false
	for line := range strings.SplitSeq(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			fenced = !fenced
		case !fenced && strings.HasPrefix(line, "#") && strings.Contains(line, "`"+pattern+"`"):
			return true
		}
	}
	return false
}

var (
	uuidForm = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	uuidIn   = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
)

func isTimestamp(s string) bool {
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// docMatcher compares real replies with documented ones and remembers
// which real UUID each documented UUID stands for.
type docMatcher struct {
	real   map[string]string // documented UUID → real
	byReal map[string]string // real UUID → documented
}

func newDocMatcher() *docMatcher {
	return &docMatcher{real: map[string]string{}, byReal: map[string]string{}}
}

// substitute replaces the documented UUIDs in s by the real ones they
// stand for.
func (m *docMatcher) substitute(s string) string {
	return uuidIn.ReplaceAllStringFunc(s, func(u string) string {
		if r, ok := m.real[u]; ok {
			return r
		}
		return u
	})
}

// document replaces the real UUIDs in s by the documented ones that
// stand for them: a failure shows a reply as the document would.
func (m *docMatcher) document(s string) string {
	return uuidIn.ReplaceAllStringFunc(s, func(u string) string {
		if d, ok := m.byReal[u]; ok {
			return d
		}
		return u
	})
}

// check compares the real reply r with ex's documented one.
func (m *docMatcher) check(ex example, r reply) []string {
	var errs []string
	if r.status != ex.status {
		errs = append(errs, fmt.Sprintf("status %d, documented %d", r.status, ex.status))
	}
	for name, want := range ex.headers {
		if got := r.header.Get(name); got != want {
			errs = append(errs, fmt.Sprintf("header %s: %q, documented %q", name, got, want))
		}
	}
	switch ex.replyKind {
	case "":
		if len(bytes.TrimSpace(r.body)) != 0 {
			errs = append(errs, "a body, documented none")
		}
	case "text":
		errs = append(errs, checkMetricsText(ex.reply, string(r.body))...)
	case "json":
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			errs = append(errs, fmt.Sprintf("Content-Type %q, documented JSON", ct))
		}
		var want, got any
		if err := decodeNumbers(ex.reply, &want); err != nil {
			return append(errs, "documented reply: "+err.Error())
		}
		if err := decodeNumbers(string(r.body), &got); err != nil {
			return append(errs, "real reply: "+err.Error())
		}
		m.compare("reply", want, got, true, &errs)
	}
	return errs
}

func decodeNumbers(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	return dec.Decode(v)
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// compare compares got with the documented want at path. With values
// false only the shape is compared (fields and types): for elements of a
// real array beyond the documented ones, which are held to the last
// documented element.
func (m *docMatcher) compare(path string, want, got any, values bool, errs *[]string) {
	if jsonKind(want) != jsonKind(got) {
		*errs = append(*errs, fmt.Sprintf("%s: %s, documented %s", path, jsonKind(got), jsonKind(want)))
		return
	}
	switch w := want.(type) {
	case bool:
		if values && w != got.(bool) {
			*errs = append(*errs, fmt.Sprintf("%s: %v, documented %v", path, got, w))
		}
	case string:
		g := got.(string)
		switch {
		case uuidForm.MatchString(w):
			if !uuidForm.MatchString(g) {
				*errs = append(*errs, fmt.Sprintf("%s: %q, documented a UUID", path, g))
			} else if values {
				m.bind(path, w, g, errs)
			}
		case isTimestamp(w):
			if !isTimestamp(g) {
				*errs = append(*errs, fmt.Sprintf("%s: %q, documented an RFC 3339 timestamp", path, g))
			}
		case values && m.substitute(w) != g:
			*errs = append(*errs, fmt.Sprintf("%s: %q, documented %q", path, g, w))
		}
	case []any:
		g := got.([]any)
		if len(w) == 0 && len(g) > 0 {
			*errs = append(*errs, fmt.Sprintf("%s: %d elements, documented none", path, len(g)))
			return
		}
		for i := range g {
			if i < len(w) {
				m.compare(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], values, errs)
			} else {
				m.compare(fmt.Sprintf("%s[%d]", path, i), w[len(w)-1], g[i], false, errs)
			}
		}
		for i := len(g); i < len(w); i++ {
			*errs = append(*errs, fmt.Sprintf("%s[%d]: missing, documented", path, i))
		}
	case map[string]any:
		g := got.(map[string]any)
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			wv, inDoc := w[k]
			gv, inReply := g[k]
			switch {
			case !inReply:
				*errs = append(*errs, fmt.Sprintf("%s.%s: missing from the reply, documented", path, k))
			case !inDoc:
				*errs = append(*errs, fmt.Sprintf("%s.%s: in the reply, undocumented", path, k))
			default:
				m.compare(path+"."+k, wv, gv, values, errs)
			}
		}
	}
}

// bind records that the documented UUID doc stands for real, or reports
// that either already stands for another.
func (m *docMatcher) bind(path, doc, real string, errs *[]string) {
	if r, ok := m.real[doc]; ok {
		if r != real {
			*errs = append(*errs, fmt.Sprintf("%s: %s stands for another value in an earlier reply", path, doc))
		}
		return
	}
	if d, ok := m.byReal[real]; ok {
		*errs = append(*errs, fmt.Sprintf("%s: documented %s, but an earlier reply documents this value as %s", path, doc, d))
		return
	}
	m.real[doc], m.byReal[real] = real, doc
}

// checkMetricsText compares a Prometheus text page with the documented
// excerpt: the same metric families (# TYPE lines), and every documented
// series (a sample's name and labels) present; values vary.
func checkMetricsText(want, got string) []string {
	families := func(s string) []string {
		var out []string
		for line := range strings.SplitSeq(s, "\n") {
			if strings.HasPrefix(line, "# TYPE ") {
				out = append(out, strings.TrimSpace(line))
			}
		}
		sort.Strings(out)
		return out
	}
	series := func(s string) map[string]bool {
		out := map[string]bool{}
		for line := range strings.SplitSeq(s, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				out[line[:i]] = true
			}
		}
		return out
	}
	var errs []string
	wf, gf := families(want), families(got)
	for _, f := range wf {
		if !slices.Contains(gf, f) {
			errs = append(errs, "missing from the reply, documented: "+f)
		}
	}
	for _, f := range gf {
		if !slices.Contains(wf, f) {
			errs = append(errs, "in the reply, undocumented: "+f)
		}
	}
	have := series(got)
	for s := range series(want) {
		if !have[s] {
			errs = append(errs, "series missing from the reply, documented: "+s)
		}
	}
	sort.Strings(errs)
	return errs
}

// indentJSON renders a reply body for a failure message, in its own field
// order.
func indentJSON(b []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return string(b)
	}
	return buf.String()
}
