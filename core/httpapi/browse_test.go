package httpapi_test

import "testing"

// TestBrowseShowsLeasedAsProcessing browses on the database's clock, as
// `queen serve` runs: a message under a live lease is processing, the one
// after it pending (docs/api.md: status derived from the cursors).
func TestBrowseShowsLeasedAsProcessing(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.expect("POST", "/api/v1/push", `{"items":[{"queue":"b","payload":1},{"queue":"b","payload":2}]}`, 201)
	s.expect("GET", "/api/v1/pop/queue/b?batch=1&consumerGroup=g", nil, 200)
	var page struct {
		Messages []struct {
			Offset int64  `json:"offset"`
			Status string `json:"status"`
		} `json:"messages"`
	}
	s.expect("GET", "/api/v1/messages?queue=b", nil, 200).json(t, &page)
	want := []string{"processing", "pending"}
	if len(page.Messages) != len(want) {
		t.Fatalf("%d messages, want %d", len(page.Messages), len(want))
	}
	for i, m := range page.Messages {
		if m.Offset != int64(i) || m.Status != want[i] {
			t.Errorf("offset %d: status %q, want %q", m.Offset, m.Status, want[i])
		}
	}
}
