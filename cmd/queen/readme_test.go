package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queen-serverless/queen/internal/pgtest"
)

// readmeQ is the walkthrough's first line, the address of `make run`.
const readmeQ = "Q=http://localhost:6632"

// A walkthroughStep is the commands the README prints before a reply, and
// the reply it shows under them ("# → 200 {...}", continued on lines "#  ").
type walkthroughStep struct {
	commands []string
	status   int
	reply    string // … stands for anything
}

// TestREADMEWalkthrough runs the README's first walkthrough ("Using the
// API") as printed, with bash and curl, against `queen serve` on a fresh
// database, and holds every reply to the one the README shows: the status
// of the step's last curl and the output, where … stands for anything. A
// wrapper around curl reports each status on stderr; the output is left as
// the reader sees it.
func TestREADMEWalkthrough(t *testing.T) {
	t.Parallel()
	runWalkthrough(t, "## Using the API", func(s string) string { return s })
}

// TestREADMESubscriptionWalkthrough runs the README's subscription
// walkthrough the same way, with the example target (`queen target`) on a
// free port in the place of 127.0.0.1:8080.
func TestREADMESubscriptionWalkthrough(t *testing.T) {
	t.Parallel()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- targetCmd(ctx, []string{"-listen", addr}, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("queen target: %v", err)
		}
	})
	waitUntil(t, "the example target listening", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	runWalkthrough(t, "## Subscriptions: consumers without pollers", func(s string) string {
		return strings.ReplaceAll(s, "127.0.0.1:8080", addr)
	})
}

// runWalkthrough runs the walkthrough under heading (its sh block that
// starts with readmeQ) against a fresh `queen serve`, with rewrite applied
// to every command and reply.
func runWalkthrough(t *testing.T, heading string, rewrite func(string) string) {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "grep", "cut"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the README's walkthrough needs %s: %v", tool, err)
		}
	}
	steps := walkthroughSteps(t, readmeBlock(t, heading))
	for i := range steps {
		for j, c := range steps[i].commands {
			steps[i].commands[j] = rewrite(c)
		}
		steps[i].reply = rewrite(steps[i].reply)
	}
	s := startServe(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t)})

	const mark = "@@step@@"
	var script strings.Builder
	script.WriteString(`curl() { command curl -q -w '%{stderr}%{http_code}\n' "$@"; }` + "\n")
	for _, st := range steps {
		for _, c := range st.commands {
			if c == readmeQ {
				c = "Q=" + s.base
			}
			script.WriteString(c + "\n")
		}
		script.WriteString("printf '\\n" + mark + "\\n'; printf '" + mark + "\\n' >&2\n")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Env = append(os.Environ(), "no_proxy=*", "NO_PROXY=*")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the walkthrough: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	outs := strings.Split(stdout.String(), "\n"+mark+"\n")
	statuses := strings.Split(stderr.String(), mark+"\n")
	if len(outs) != len(steps)+1 || len(statuses) != len(steps)+1 {
		t.Fatalf("%d steps, but %d outputs and %d status lists:\n%s\n%s", len(steps), len(outs)-1, len(statuses)-1,
			stdout.String(), stderr.String())
	}
	for i, st := range steps {
		out := strings.TrimSpace(outs[i])
		codes := strings.Fields(statuses[i])
		status := 0
		if len(codes) > 0 {
			status, _ = strconv.Atoi(codes[len(codes)-1])
		}
		if status != st.status || !replyPattern(st.reply).MatchString(out) {
			t.Errorf("after %q\n got    %d %s\n README %d %s", st.command(), status, out, st.status, st.reply)
		}
	}
}

// command returns the step's last command line, to name the step: the
// last line that is not a comment, blank or a continuation.
func (st walkthroughStep) command() string {
	for _, l := range slices.Backward(st.commands) {
		if l != "" && l[0] != ' ' && l[0] != '#' {
			return l
		}
	}
	return ""
}

// readmeBlock returns the lines of the first ```sh block under heading in
// the README that starts with readmeQ.
func readmeBlock(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q", heading)
	}
	section, _, _ := strings.Cut(after, "\n## ")
	for {
		var block string
		_, section, ok = strings.Cut(section, "```sh\n")
		if ok {
			block, section, ok = strings.Cut(section, "\n```\n")
		}
		if !ok {
			t.Fatalf("README.md: no sh block under %q starts with %s", heading, readmeQ)
		}
		if strings.HasPrefix(block, readmeQ+"\n") {
			return strings.Split(block, "\n")
		}
	}
}

// walkthroughSteps splits a walkthrough into its steps: the commands up to
// each reply, and the reply.
func walkthroughSteps(t *testing.T, lines []string) []walkthroughStep {
	t.Helper()
	if len(lines) == 0 || lines[0] != readmeQ {
		t.Fatalf("the walkthrough does not start with %s", readmeQ)
	}
	var steps []walkthroughStep
	var cur walkthroughStep
	inReply := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "# → "):
			status, reply, _ := strings.Cut(strings.TrimPrefix(l, "# → "), " ")
			n, err := strconv.Atoi(status)
			if err != nil || len(cur.commands) == 0 {
				t.Fatalf("README walkthrough: %q is not a status and reply under a command", l)
			}
			cur.status, cur.reply, inReply = n, reply, true
		case inReply && strings.HasPrefix(l, "#  "):
			cur.reply += strings.TrimLeft(l[1:], " ")
		default:
			if inReply {
				steps = append(steps, cur)
				cur, inReply = walkthroughStep{}, false
			}
			cur.commands = append(cur.commands, l)
		}
	}
	if inReply {
		steps = append(steps, cur)
	} else if strings.TrimSpace(strings.Join(cur.commands, "")) != "" {
		t.Fatalf("README walkthrough: no reply shown after %q", cur.commands)
	}
	return steps
}

// replyPattern matches a reply as the README shows it: literally, but for
// each …, which stands for anything.
func replyPattern(shown string) *regexp.Regexp {
	parts := strings.Split(shown, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)^` + strings.Join(parts, ".*?") + `$`)
}
