package lambdaemu

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/queen-serverless/queen/core/dispatch"
	"github.com/queen-serverless/queen/internal/procfs"
)

// testTarget is a function that lists the records asked to fail.
const testTarget = "github.com/queen-serverless/queen/functions/internal/testtarget"

// A bootstrap built and started here answers an invocation through the
// Invoke API, as Lambda runs it; Stop leaves none of its processes
// running.
func TestRunsABootstrap(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a bootstrap and the emulator")
	}
	ctx := context.Background()
	dir := t.TempDir()
	if err := Build(ctx, dir, testTarget, RIE); err != nil {
		t.Fatal(err)
	}
	e, err := Start(ctx, filepath.Join(dir, "aws-lambda-rie"), filepath.Join(dir, "testtarget"), "AWS_REGION=eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	client := &dispatch.LambdaClient{Endpoint: e.Endpoint, Config: func(context.Context) (aws.Config, error) {
		return aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}, nil
	}}
	event := `{"records":[{"transactionId":"a","payload":{}},{"transactionId":"b","payload":{"fail":true}}]}`
	out, err := client.Invoke(ctx, Function, []byte(event))
	if err != nil {
		t.Fatalf("invoke: %v\n%s", err, e.Output())
	}
	var res dispatch.Result
	if err := json.Unmarshal(out, &res); err != nil || len(res.BatchItemFailures) != 1 || string(res.BatchItemFailures[0].ItemIdentifier) != `"b"` {
		t.Fatalf("answer %s (%v), want b listed as failed", out, err)
	}

	fns, err := procfs.Children(e.cmd.Process.Pid)
	if err != nil || len(fns) != 1 {
		t.Fatalf("the emulator's children %v (%v), want the function's process", fns, err)
	}
	e.Stop()
	for _, pid := range []int{fns[0], e.cmd.Process.Pid} {
		if !ended(pid) {
			t.Errorf("process %d still runs after Stop", pid)
		}
	}
}

// ended reports whether process pid is gone or a zombie within a few
// seconds (a killed process takes a moment to die).
func ended(pid int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, ok := procfs.Read(pid); !ok || st.State == 'Z' || st.State == 'X' {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond) // the poll's interval
	}
}
