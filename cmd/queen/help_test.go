package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
)

// TestHelpFlag runs `queen <command> -h` for every command: it prints the
// command's flags and succeeds, instead of ending in "queen: flag: help
// requested" (main prints any error run returns, and exits 1).
//
// Not parallel: it redirects os.Stdout and os.Stderr, where the commands
// print their usage.
func TestHelpFlag(t *testing.T) {
	for _, cmd := range []string{"serve", "migrate", "bench", "console", "chaos", "soak", "target", "token"} {
		out, err := captureOutput(t, func() error { return run(context.Background(), []string{cmd, "-h"}) })
		if err != nil {
			t.Errorf("queen %s -h: %v", cmd, err)
		}
		if !strings.Contains(out, "  -") {
			t.Errorf("queen %s -h lists no flags:\n%s", cmd, out)
		}
	}
	for _, args := range [][]string{{}, {"help"}, {"-h"}, {"--help"}} {
		out, err := captureOutput(t, func() error { return run(context.Background(), args) })
		if err != nil || out != usage {
			t.Errorf("queen %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// captureOutput runs f with os.Stdout and os.Stderr going to one pipe and
// returns what f wrote there.
func captureOutput(t *testing.T, f func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = w, w
	read := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		read <- string(b)
	}()
	ferr := f()
	os.Stdout, os.Stderr = stdout, stderr
	w.Close()
	out := <-read
	r.Close()
	return out, ferr
}
