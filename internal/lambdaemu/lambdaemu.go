// Package lambdaemu runs function bootstraps as Lambda runs them, on this
// machine, for the benchmark: it builds them with the go toolchain as
// `make build` builds them for Lambda, with the Lambda Runtime Interface
// Emulator (aws-lambda-rie, a tool of this module), and starts a bootstrap
// under the emulator, which serves Lambda's Invoke API for it.
//
// The emulator runs one function, named Function, one invocation at a
// time, and runs every invocation to its end before it answers, an
// asynchronous one (invocation type Event) included.
package lambdaemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RIE is the emulator's package: a tool of this module (go.mod), so its
// version is pinned and it builds offline from the module cache.
const RIE = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

// Function is the name of the emulator's one function in its Invoke API.
const Function = "function"

// DefaultTimeout is the function timeout an emulator gives its function
// unless the environment sets AWS_LAMBDA_FUNCTION_TIMEOUT.
const DefaultTimeout = 30 * time.Second

// startWithin bounds how long Start waits for the emulator to listen.
const startWithin = time.Minute

// ErrNoToolchain is Build's error when there is no go command on PATH.
var ErrNoToolchain = errors.New("no go command on PATH")

// Build builds pkgs (import paths of main packages) for this machine into
// dir, each binary named for its path's last element, the way `make build`
// builds the bootstraps for Lambda (static: CGO_ENABLED=0; -trimpath,
// stripped, -tags lambda.norpc), with one go build. It builds offline
// (GOPROXY=off), from the build cache and the module cache only, in the
// current directory, which must be inside a module that requires them (this
// one). It returns ErrNoToolchain without a go command, and go build's own
// message when the build fails (a module missing from the cache among
// them).
func Build(ctx context.Context, dir string, pkgs ...string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return ErrNoToolchain
	}
	args := append([]string{"build", "-trimpath", "-ldflags", "-s -w", "-tags", "lambda.norpc",
		"-o", dir + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w: %s", err, lastLines(out, 5))
	}
	return nil
}

// Emulator is one aws-lambda-rie process running one bootstrap, in a
// process group of its own that Stop ends with the function's process.
type Emulator struct {
	// Endpoint is the base URL of the Invoke API the emulator serves (a
	// dispatch.LambdaClient's Endpoint); its function is Function.
	Endpoint string

	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{} // closed once the emulator's process is reaped
	once   sync.Once
}

// Start runs bootstrap under the emulator rie, on free ports of 127.0.0.1,
// and returns once the emulator listens. The function's environment is
// PATH, AWS_LAMBDA_FUNCTION_NAME (the bootstrap's name),
// AWS_LAMBDA_FUNCTION_TIMEOUT (DefaultTimeout) and AWS_ENDPOINT_URL_LAMBDA
// (the emulator itself, so a function that invokes another, or itself,
// never reaches AWS), then env, whose entries win; nothing else of this
// process's environment. The function's process starts at the first
// invocation. The caller must Stop the emulator.
func Start(ctx context.Context, rie, bootstrap string, env ...string) (*Emulator, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + ports[0]
	cmd := exec.Command(rie, "--log-level", "error",
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", "127.0.0.1:"+ports[1],
		bootstrap)
	e := &Emulator{Endpoint: "http://" + addr, cmd: cmd, out: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"AWS_LAMBDA_FUNCTION_NAME=" + filepath.Base(bootstrap),
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(int(DefaultTimeout.Seconds())),
		"AWS_ENDPOINT_URL_LAMBDA=" + e.Endpoint,
	}, env...) // exec keeps the last of duplicate names
	cmd.Stdout, cmd.Stderr = e.out, e.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second // for the output's pipe, should a process outlive the group's kill
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the emulator: %w", err)
	}
	go func() {
		_ = cmd.Wait()
		close(e.exited)
	}()
	// The emulator says nothing when it starts listening (log level
	// error), so its port is polled until it answers.
	deadline := time.Now().Add(startWithin)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return e, nil
		}
		select {
		case <-e.exited:
			return nil, fmt.Errorf("the emulator exited before listening: %s", lastLines([]byte(e.Output()), 5))
		case <-ctx.Done():
			e.Stop()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond): // the poll's interval
		}
		if time.Now().After(deadline) {
			e.Stop()
			return nil, fmt.Errorf("the emulator is not listening after %s: %v: %s", startWithin, err, lastLines([]byte(e.Output()), 5))
		}
	}
}

// Output is what the emulator and its function wrote so far (the
// function's logs and the emulator's reports).
func (e *Emulator) Output() string { return e.out.String() }

// Stop kills the emulator's process group, the function's process with
// it, and waits for the emulator to exit. It may be called more than once.
func (e *Emulator) Stop() {
	e.once.Do(func() {
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		<-e.exited
	})
}

// freePorts returns n TCP ports of 127.0.0.1 free a moment ago.
func freePorts(n int) ([]string, error) {
	var ports []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // held until all are picked, so they differ
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	return ports, nil
}

// lastLines is the end of a command's output, for an error message.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
