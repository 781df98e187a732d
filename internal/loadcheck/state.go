package loadcheck

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
)

// Reader fetches one JSON reply of a GET into v: each harness its own way
// (retried, recorded or not).
type Reader func(ctx context.Context, path string, v any) error

// statePage is the page size of ReadLog and ReadDLQ.
const statePage = 1000

// ReadLog reads partition's stored messages from offset from through last
// with the browse route, page by page, and calls each for every one.
func ReadLog(ctx context.Context, read Reader, queue, partition string, from, last int64, each func(Message)) error {
	for from <= last {
		v := url.Values{"queue": {queue}, "partition": {partition}, "fromOffset": {strconv.FormatInt(from, 10)},
			"limit": {strconv.Itoa(statePage)}}
		var b Browse
		if err := read(ctx, "/api/v1/messages?"+v.Encode(), &b); err != nil {
			return err
		}
		if len(b.Messages) == 0 {
			return nil
		}
		next := from
		for _, m := range b.Messages {
			each(m)
			next = max(next, m.Offset+1)
		}
		if next == from {
			return fmt.Errorf("browse of %s from offset %d returned only earlier offsets", partition, from)
		}
		from = next
	}
	return nil
}

// ReadDLQ reads queue's dead letters, page by page, and calls each for
// every one.
func ReadDLQ(ctx context.Context, read Reader, queue string, each func(DeadLetter)) error {
	for offset := 0; ; offset += statePage {
		v := url.Values{"queue": {queue}, "limit": {strconv.Itoa(statePage)}, "offset": {strconv.Itoa(offset)}}
		var d DLQPage
		if err := read(ctx, "/api/v1/dlq?"+v.Encode(), &d); err != nil {
			return err
		}
		for _, m := range d.Messages {
			each(m)
		}
		if len(d.Messages) < statePage || int64(offset+statePage) >= d.Total {
			return nil
		}
	}
}
