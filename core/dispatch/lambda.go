package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// LambdaInvoker invokes function targets with the Lambda API, synchronously
// (RequestResponse). The Runtime Interface Emulator serves the same API, so
// a client whose endpoint is an emulator's invokes the function it runs.
type LambdaInvoker struct {
	Client *lambda.Client
}

// Invoke implements Invoker: a function error (an error the function
// returned, a crash, a timeout) and a failed call (a throttle, a missing
// function, no permission) are errors.
func (l LambdaInvoker) Invoke(ctx context.Context, function string, payload []byte) ([]byte, error) {
	out, err := l.Client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(function),
		InvocationType: types.InvocationTypeRequestResponse,
		Payload:        payload,
	})
	if err != nil {
		return nil, err
	}
	if out.FunctionError != nil {
		return nil, fmt.Errorf("function %s failed (%s): %s", function, *out.FunctionError, errorText(out.Payload))
	}
	// The emulator answers a function error without the header, and a
	// timeout with a line of text.
	if msg, ok := errorPayload(out.Payload); ok {
		return nil, fmt.Errorf("function %s failed: %s", function, msg)
	}
	if len(bytes.TrimSpace(out.Payload)) > 0 && !json.Valid(out.Payload) {
		return nil, fmt.Errorf("function %s failed: %s", function, errorText(out.Payload))
	}
	return out.Payload, nil
}

// errorPayload recognises Lambda's error payload, {"errorMessage",
// "errorType"} without "batchItemFailures".
func errorPayload(p []byte) (string, bool) {
	if !bytes.HasPrefix(bytes.TrimSpace(p), []byte("{")) {
		return "", false
	}
	var e struct {
		Message  *string          `json:"errorMessage"`
		Type     *string          `json:"errorType"`
		Failures *json.RawMessage `json:"batchItemFailures"`
	}
	if json.Unmarshal(p, &e) != nil || e.Message == nil || e.Failures != nil {
		return "", false
	}
	if e.Type != nil {
		return *e.Type + ": " + *e.Message, true
	}
	return *e.Message, true
}

// errorText is a function error's payload for a log line, shortened.
func errorText(p []byte) string {
	if msg, ok := errorPayload(p); ok {
		return msg
	}
	if len(p) > 200 {
		return string(p[:200]) + "…"
	}
	return string(p)
}
