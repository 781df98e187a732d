package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

type configureRequest struct {
	Queue     string          `json:"queue"`
	Namespace string          `json:"namespace"`
	Task      string          `json:"task"`
	Mode      string          `json:"mode"`
	Options   json.RawMessage `json:"options"`
}

// refusedOptions are Queen options the log does not have, with the reason.
var refusedOptions = map[string]string{
	"minPopWaitTime":              "is not supported: a pop answers as soon as it has messages (use wait=true&timeout for long polls)",
	"retentionSinkHold":           "is not supported: there is no retention sink; retention deletes segments",
	"retentionSinkHoldMaxSeconds": "is not supported: there is no retention sink; retention deletes segments",
}

// optionNames lists the options configure reads: queen.QueueOptions' JSON names.
var optionNames = func() string {
	t := reflect.TypeFor[queen.QueueOptions]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}()

// queueOptions reads configure's options, refusing names it does not know
// rather than ignoring them.
func queueOptions(raw json.RawMessage) (queen.QueueOptions, error) {
	var opts queen.QueueOptions
	if len(raw) == 0 || string(raw) == "null" {
		return opts, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(&opts)
	if err == nil {
		return opts, nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return opts, queen.Invalid("options."+te.Field, "must be %s, not %s", jsonType(te.Type.Kind().String()), te.Value)
	}
	// encoding/json reports `json: unknown field "<name>"`.
	if q, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if name, uerr := strconv.Unquote(q); uerr == nil {
			if why, ok := refusedOptions[name]; ok {
				return opts, queen.Invalid("options."+name, "%s", why)
			}
			return opts, queen.Invalid("options."+name, "unknown option; the options are %s", optionNames)
		}
	}
	return opts, queen.Invalid("options", "must be a JSON object of options")
}

// PriorityNote explains why priority has no effect.
const PriorityNote = "priority is accepted for client compatibility and has no effect: partitions are drained in offset order"

// RetentionOffNote says that the queue's retention windows are kept but not
// applied.
const RetentionOffNote = "retentionEnabled is false: the retention windows are kept as given but the deployment's " +
	"default retention applies instead (effectiveRetentionSeconds and effectiveCompletedRetentionSeconds) until it is true"

func (a *API) configure(w http.ResponseWriter, r *http.Request) error {
	var req configureRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Mode != "" && req.Mode != "merge" {
		return queen.Invalid("mode", "only merge is supported: options not given keep their value")
	}
	opts, err := queueOptions(req.Options)
	if err != nil {
		return err
	}
	q, err := a.store.Configure(r.Context(), queen.ConfigureRequest{Queue: req.Queue, Namespace: req.Namespace,
		Task: req.Task, Options: opts})
	if err != nil {
		return err
	}
	out := map[string]any{"configured": true, "queue": q.Name, "namespace": q.Namespace, "task": q.Task, "options": q.Options}
	var notes []string
	if opts.Priority != nil {
		notes = append(notes, PriorityNote)
	}
	if o := q.Options; !o.RetentionEnabled && (o.RetentionSeconds > 0 || o.TTL > 0 || o.MaxWaitTimeSeconds > 0 ||
		o.CompletedRetentionSeconds > 0) {
		notes = append(notes, RetentionOffNote)
	}
	if notes != nil {
		out["notes"] = notes
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) listQueues(w http.ResponseWriter, r *http.Request) error {
	qs, err := a.store.ListQueues(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": qs})
	return nil
}

// getQueue describes a queue with a page of its partitions in name order:
// ?partitionsAfter=<name>&partitionsLimit=<n> (default 1000, at most
// 10000, clamped); nextPartition in the reply is the next page's
// partitionsAfter, absent on the last page.
func (a *API) getQueue(w http.ResponseWriter, r *http.Request) error {
	query := r.URL.Query()
	page := queen.PartitionPage{After: first(query, "partitionsAfter")}
	limit, err := queryInt(query, "partitionsLimit", queen.DefaultPartitionPage)
	if err != nil {
		return err
	}
	page.Limit = max(limit, 1)
	q, err := a.store.Queue(r.Context(), r.PathValue("queue"), page)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, q)
	return nil
}

func (a *API) deleteQueue(w http.ResponseWriter, r *http.Request) error {
	if err := a.store.DeleteQueue(r.Context(), r.PathValue("queue")); err != nil {
		return err
	}
	a.gone(r.Context(), r.PathValue("queue"), "")
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "queue": r.PathValue("queue")})
	return nil
}

func (a *API) listGroups(w http.ResponseWriter, r *http.Request) error {
	gs, err := a.store.ListGroups(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"consumerGroups": gs})
	return nil
}

func (a *API) getGroup(w http.ResponseWriter, r *http.Request) error {
	g, err := a.store.Group(r.Context(), r.PathValue("group"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, g)
	return nil
}

func (a *API) deleteGroup(w http.ResponseWriter, r *http.Request) error {
	if err := a.store.DeleteGroup(r.Context(), r.PathValue("group"), r.PathValue("queue")); err != nil {
		return err
	}
	a.gone(r.Context(), r.PathValue("queue"), r.PathValue("group"))
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "consumerGroup": r.PathValue("group")})
	return nil
}

type seekRequest struct {
	ToEnd       bool              `json:"toEnd"`
	ToBeginning bool              `json:"toBeginning"`
	Timestamp   string            `json:"timestamp"`
	Offsets     map[string]*int64 `json:"offsets"` // a pointer: null is refused, not read as 0
}

func (a *API) seek(w http.ResponseWriter, r *http.Request) error {
	var req seekRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	t := queen.SeekTarget{ToEnd: req.ToEnd, ToBeginning: req.ToBeginning}
	if req.Offsets != nil {
		t.Offsets = make(map[string]int64, len(req.Offsets))
		for p, o := range req.Offsets {
			if o == nil {
				return queen.Invalid("offsets."+p, "must be the next offset to deliver (an integer), not null")
			}
			t.Offsets[p] = *o
		}
	}
	if req.Timestamp != "" {
		ts, err := time.Parse(time.RFC3339Nano, req.Timestamp)
		if err != nil {
			return queen.Invalid("timestamp", "must be an RFC 3339 timestamp")
		}
		t.Timestamp = &ts
	}
	res, err := a.store.Seek(r.Context(), r.PathValue("group"), r.PathValue("queue"), t)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": r.PathValue("group"),
		"queue": r.PathValue("queue"), "partitions": res})
	return nil
}

func (a *API) browse(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	req := queen.BrowseRequest{Queue: first(q, "queue"), Partition: first(q, "partition")}
	from, err := queryInt(q, "fromOffset", 0)
	if err != nil {
		return err
	}
	req.FromOffset = int64(from)
	if req.Limit, err = queryInt(q, "limit", 100); err != nil {
		return err
	}
	req.Limit = min(max(req.Limit, 1), queen.MaxBrowseLimit) // clamped, as Queen's clients expect (queenctl asks for 10000)
	msgs, err := a.store.Browse(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs})
	return nil
}
