package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/queen-serverless/queen/core/dispatch"
)

// targetCmd runs an example subscription target (docs/subscriptions.md): it
// prints each event it receives and answers it as a Lambda function with
// partial-batch responses would, failing the records whose payload has
// "fail": true.
func targetCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("target", flag.ContinueOnError)
	addr := fs.String("listen", "127.0.0.1:8080", "address to listen on")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: queen target [-listen address]

An example subscription target (docs/subscriptions.md): it prints each event
it receives and answers as a Lambda function with partial-batch responses
would, failing the records whose payload has "fail": true.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: targetHandler(stdout), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "example target on http://%s/ (records with \"fail\": true in their payload fail)\n", ln.Addr())
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func targetHandler(stdout io.Writer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev dispatch.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			http.Error(w, "not an event: "+err.Error(), http.StatusBadRequest)
			return
		}
		failures := []map[string]string{}
		for _, rec := range ev.Records {
			var p struct {
				Fail bool `json:"fail"`
			}
			_ = json.Unmarshal(rec.Payload, &p) // a payload that is not an object does not fail
			outcome := "completed"
			if p.Fail {
				outcome = "failed"
				failures = append(failures, map[string]string{"itemIdentifier": rec.TransactionID})
			}
			fmt.Fprintf(stdout, "%s/%s offset %d retryCount %d %s: %s\n", ev.Queue, ev.Partition, rec.Offset,
				rec.RetryCount, outcome, rec.Payload)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"batchItemFailures": failures})
	})
}
