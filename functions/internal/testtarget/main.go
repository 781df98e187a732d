// Command testtarget is a subscription's target function for the tests: a
// Lambda function, run under the Runtime Interface Emulator, that answers
// each event with Lambda's partial-batch response. A record whose payload
// has "fail": true is listed as failed; "error": true makes the whole
// invocation fail; "sleepMs": N makes it take that long (past the
// function's timeout, a timeout).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/queen-serverless/queen/core/dispatch"
)

type instructions struct {
	Fail    bool `json:"fail"`
	Error   bool `json:"error"`
	SleepMs int  `json:"sleepMs"`
}

func handle(ctx context.Context, ev dispatch.Event) (dispatch.Result, error) {
	var res dispatch.Result
	for _, r := range ev.Records {
		var in instructions
		_ = json.Unmarshal(r.Payload, &in) // a payload that is not an object asks nothing
		switch {
		case in.Error:
			return dispatch.Result{}, errors.New("asked to fail: " + r.TransactionID)
		case in.SleepMs > 0:
			select {
			case <-ctx.Done():
				return dispatch.Result{}, ctx.Err()
			case <-time.After(time.Duration(in.SleepMs) * time.Millisecond):
			}
		case in.Fail:
			id, _ := json.Marshal(r.TransactionID)
			res.BatchItemFailures = append(res.BatchItemFailures, dispatch.ItemFailure{ItemIdentifier: id})
		}
	}
	return res, nil
}

func main() { lambda.Start(handle) }
