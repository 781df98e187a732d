package httpapi_test

import (
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The Prometheus page escapes label values as the text format requires, so
// a scraper parses it whatever the group and queue are called, and reads
// the names back unchanged.
func TestMetricsEscapeLabelValues(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const group, queueName = "zero\u200bwidth \"quoted\" back\\slash", "q.metrics"
	s.pushN(queueName, "p", 3)
	if _, ok := s.popGroup(queueName, "p", group, 1, ""); !ok {
		t.Fatal("no message")
	}
	page := s.expect("GET", "/metrics/prometheus", nil, 200)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(page.body)))
	if err != nil {
		t.Fatalf("a scraper rejects the page: %v\n%s", err, page.body)
	}
	lag := families["queen_group_lag"]
	if lag == nil {
		t.Fatalf("no queen_group_lag:\n%s", page.body)
	}
	found := false
	for _, m := range lag.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["group"] == group && labels["queue"] == queueName {
			found = true
			if v := m.GetGauge().GetValue(); v != 3 {
				t.Errorf("lag of %q on %q is %v, want 3 (one leased, none committed)", group, queueName, v)
			}
		}
	}
	if !found {
		t.Fatalf("no lag series for group %q on %q:\n%s", group, queueName, page.body)
	}
	if d := families["queen_queue_depth"]; d == nil || len(d.Metric) != 1 || d.Metric[0].Label[0].GetValue() != queueName {
		t.Fatalf("queue depth series: %v", d)
	}
}
