package httpapi

import (
	"net/http"
	"sort"
	"strings"

	"github.com/queen-serverless/queen/core/queen"
)

// Overview is GET /api/v1/resources/overview: every queue's depth,
// dead-letter count and per-group lag in one read (the store's gauges, as
// /metrics reports them), so a dashboard needs one request per refresh.
type Overview struct {
	Totals OverviewTotals  `json:"totals"`
	Queues []QueueOverview `json:"queues"`
}

// OverviewTotals sums the overview over every queue.
type OverviewTotals struct {
	Queues      int64 `json:"queues"`
	Partitions  int64 `json:"partitions"`
	Depth       int64 `json:"depth"`
	DeadLetters int64 `json:"deadLetters"`
}

// QueueOverview is one queue of the overview. A queue that was deleted
// while dead letters of it remain is listed with Deleted set.
type QueueOverview struct {
	Name        string     `json:"name"`
	Depth       int64      `json:"depth"`
	DeadLetters int64      `json:"deadLetters"`
	MaxLag      int64      `json:"maxLag"`
	Groups      []GroupLag `json:"groups"`
	Deleted     bool       `json:"deleted,omitempty"`
}

// GroupLag is a consumer group's exact lag on a queue, in messages.
type GroupLag struct {
	Group string `json:"group"`
	Lag   int64  `json:"lag"`
}

// overviewOf arranges the store's gauges by queue, in name order.
func overviewOf(st queen.Stats) Overview {
	byName := map[string]*QueueOverview{}
	get := func(name string) *QueueOverview {
		q := byName[name]
		if q == nil {
			q = &QueueOverview{Name: name, Groups: []GroupLag{}, Deleted: true}
			byName[name] = q
		}
		return q
	}
	for name, depth := range st.Depth {
		q := get(name)
		q.Depth, q.Deleted = depth, false
	}
	for name, n := range st.DLQ {
		get(name).DeadLetters = n
	}
	for key, lag := range st.Lag {
		group, queue, ok := strings.Cut(key, queen.LagKeySeparator)
		if !ok {
			continue
		}
		q := get(queue)
		q.Groups = append(q.Groups, GroupLag{Group: group, Lag: lag})
		q.MaxLag = max(q.MaxLag, lag)
	}
	out := Overview{Totals: OverviewTotals{Queues: st.Queues, Partitions: st.Partitions}, Queues: []QueueOverview{}}
	for _, q := range byName {
		sort.Slice(q.Groups, func(i, j int) bool { return q.Groups[i].Group < q.Groups[j].Group })
		out.Totals.Depth += q.Depth
		out.Totals.DeadLetters += q.DeadLetters
		out.Queues = append(out.Queues, *q)
	}
	sort.Slice(out.Queues, func(i, j int) bool { return out.Queues[i].Name < out.Queues[j].Name })
	return out
}

func (a *API) overview(w http.ResponseWriter, r *http.Request) error {
	st, err := a.store.Stats(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, overviewOf(st))
	return nil
}
