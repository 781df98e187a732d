package soak

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/loadcheck"
)

func TestHistQuantiles(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 500}, {0.99, 990}, {1, 1000}} {
		if got := h.quantile(c.q); math.Abs(got-c.want)/c.want > histGrowth-1 {
			t.Errorf("quantile %v = %.2f ms, want %.0f ms within 2%%", c.q, got, c.want)
		}
	}
	var empty hist
	if empty.quantile(0.99) != 0 {
		t.Error("an empty histogram has a p99")
	}
}

func TestLongTransactionSchedule(t *testing.T) {
	full := Config{URL: "x"}.WithDefaults().longTxStarts()
	if len(full) != 6 || full[0] != 150*time.Second || full[5] != 1650*time.Second {
		t.Errorf("full run: long transactions at %v, want six, 2m30s to 27m30s", full)
	}
	if short := (Config{URL: "x", Short: true}).WithDefaults().longTxStarts(); len(short) != 1 {
		t.Errorf("short form: long transactions at %v, want one", short)
	}
}

// checkFixture is a history of one partition and one group, retention 60 s.
type checkFixture struct {
	h  *history
	p  *partState
	t0 time.Time
}

func newCheckFixture() *checkFixture {
	cfg := Config{URL: "x", Partitions: 1, Groups: 1, Retention: time.Minute}.WithDefaults()
	h := newHistory(cfg, []string{"g"})
	return &checkFixture{h: h, p: h.parts[0], t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// push places offsets 0..n-1, the push of offset i sent i seconds after t0.
func (f *checkFixture) push(n int) {
	for i := range n {
		f.h.place(f.p, "pid", int64(i), rec{key: uint64(i + 1), tx: hashTx("tx" + string(rune('a'+i))), sent: f.t0.Add(time.Duration(i) * time.Second).UnixNano()})
	}
}

// pop delivers offsets, the pop sent and answered at the given time.
func (f *checkFixture) pop(at time.Time, offsets ...int64) *popRecord {
	lease := "lease"
	res := loadcheck.Pop{LeaseID: &lease}
	for _, off := range offsets {
		res.Messages = append(res.Messages, loadcheck.Message{TransactionID: "tx" + string(rune('a'+off)), PartitionID: "pid",
			Partition: f.p.name, Offset: off, Data: payload(uint64(off+1), f.p.name)})
	}
	return f.h.popped("g", res, loadcheck.Reply{Status: 200, Sent: at, Back: at})
}

func (f *checkFixture) final(at time.Time, last int64) {
	f.h.final(&finalState{at: at, last: map[string]int64{f.p.name: last}, lag: map[string]int64{"g": 0},
		log: map[string]map[int64]loadcheck.Message{}, from: map[string]int64{f.p.name: last + 1}, dlq: map[deadAddr]bool{}})
}

// A pop that passes over offsets is a loss unless retention may have
// removed them: their push was sent at least the retention before.
func TestSkippedOffsetsAreLostUnlessPastRetention(t *testing.T) {
	f := newCheckFixture()
	f.push(4)
	f.pop(f.t0.Add(10*time.Second), 0)
	f.pop(f.t0.Add(20*time.Second), 2, 3) // offset 1 (sent at 1 s) passed over 19 s later
	f.final(f.t0.Add(time.Hour), 3)
	if f.h.v.Count(loadcheck.KindLost) != 1 || !strings.Contains(strings.Join(f.h.v.Describe(), "\n"), "offset 1 never delivered") {
		t.Errorf("violations %v, want offset 1 lost", f.h.v.Describe())
	}

	f = newCheckFixture()
	f.push(4)
	f.pop(f.t0.Add(10*time.Second), 0)
	f.pop(f.t0.Add(61*time.Second), 2, 3) // 60 s after offset 1 was pushed: retention may have removed it
	f.final(f.t0.Add(time.Hour), 3)
	if len(f.h.v.Describe()) != 0 || f.h.n.expired.Load() != 1 {
		t.Errorf("violations %v, expired %d; want none and one expired", f.h.v.Describe(), f.h.n.expired.Load())
	}
}

// A message redelivered at or below a cursor an ack answered is an ack
// undone; an ack answering a lower cursor than an earlier one is too.
func TestAckUndone(t *testing.T) {
	f := newCheckFixture()
	f.push(3)
	pr := f.pop(f.t0.Add(5*time.Second), 0, 1)
	pr.parts[0].msgs[0].status, pr.parts[0].msgs[1].status = "completed", "completed"
	one := int64(1)
	f.h.acked(pr, ackCall{r: loadcheck.Reply{Status: 200, Sent: f.t0.Add(6 * time.Second), Back: f.t0.Add(6 * time.Second)},
		results: []loadcheck.AckResult{{Success: true, Result: "committed", Offset: new(int64(0)), Committed: &one, LeaseReleased: true},
			{Success: true, Result: "committed", Offset: new(int64(1)), Committed: &one, LeaseReleased: true}}})
	if d := f.h.v.Describe(); len(d) != 0 {
		t.Fatalf("violations after a right ack: %v", d)
	}
	f.pop(f.t0.Add(7*time.Second), 1, 2)
	if f.h.v.Count(loadcheck.KindLost) != 1 {
		t.Errorf("violations %v, want offset 1 delivered again after committed 1", f.h.v.Describe())
	}
}

// A repeat inside the dedup window answered queued, or a fresh item
// answered duplicate, breaks a promise.
func TestDedupAnswers(t *testing.T) {
	f := newCheckFixture()
	orig := sample{part: f.p, tx: "soak-1", pid: "pid", off: 0, sent: f.t0, back: f.t0}
	items := []*sentItem{{part: f.p, key: 1, tx: "soak-1"}, {part: f.p, key: 2, tx: "soak-1", kind: itemRepeat, orig: orig}}
	f.h.pushed(items, []loadcheck.PushResult{
		{Index: 0, TransactionID: "soak-1", Status: "queued", PartitionID: "pid", Offset: 0, Partition: f.p.name},
		{Index: 1, TransactionID: "soak-1", Status: "duplicate", PartitionID: "pid", Offset: 0, Partition: f.p.name},
	}, loadcheck.Reply{Status: 201, Sent: f.t0, Back: f.t0})
	if d := f.h.v.Describe(); len(d) != 0 {
		t.Fatalf("violations after right answers: %v", d)
	}
	items = []*sentItem{{part: f.p, key: 3, tx: "soak-1", kind: itemRepeat, orig: orig}}
	f.h.pushed(items, []loadcheck.PushResult{{Index: 0, TransactionID: "soak-1", Status: "queued", PartitionID: "pid", Offset: 1, Partition: f.p.name}},
		loadcheck.Reply{Status: 201, Sent: f.t0.Add(time.Second), Back: f.t0.Add(time.Second)})
	if f.h.v.Count(kindDedup) != 1 {
		t.Errorf("violations %v, want a repeat inside the window answered queued", f.h.v.Describe())
	}
}

func TestSizeAndP99Checks(t *testing.T) {
	cfg := Config{URL: "x", Duration: 30 * time.Minute, SampleEvery: time.Minute}
	var samples []Sample
	for m := 0; m <= 30; m++ {
		samples = append(samples, Sample{ElapsedS: float64(60 * m), TotalBytes: 1000 + int64(min(m, 20))*10})
	}
	if c := sizeCheck(samples, 0, cfg, true); !c.Pass {
		t.Errorf("a plateau from minute 20 fails: %+v", c)
	}
	samples[30].TotalBytes = 1200 * 106 / 100
	if c := sizeCheck(samples, 0, cfg, true); c.Pass {
		t.Errorf("6%% growth over the last third passes: %+v", c)
	}
	// A backlog stored before the traffic is not what the growth is
	// measured against: 60 bytes on 1,200 is 5 %, on the 200 beyond a
	// backlog of 1,000 it is 30 %.
	samples[30].TotalBytes = 1200 + 60
	if c := sizeCheck(samples, 0, cfg, true); !c.Pass {
		t.Errorf("5%% growth without a backlog fails: %+v", c)
	}
	if c := sizeCheck(samples, 1000, cfg, true); c.Pass || !strings.Contains(c.Detail, "+30.0%") {
		t.Errorf("30%% growth beyond the backlog passes: %+v", c)
	}
	samples[30].TotalBytes = 1200 + 10
	if c := sizeCheck(samples, 1000, cfg, true); !c.Pass {
		t.Errorf("5%% growth beyond the backlog fails: %+v", c)
	}
	if c := p99Check("push", LatencyStat{N: 10, P99MS: 10}, LatencyStat{N: 10, P99MS: 15}, true); !c.Pass {
		t.Errorf("1.5× fails: %+v", c)
	}
	if c := p99Check("push", LatencyStat{N: 10, P99MS: 10}, LatencyStat{N: 10, P99MS: 15.5}, true); c.Pass {
		t.Errorf("1.55× passes: %+v", c)
	}
}

// The reaper catches up after a long transaction when a pass that started
// after it ended left nothing behind, before the next one opened.
func TestCaughtUp(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	behind := queen.ReapStats{Behind: true, Backlog: queen.ReapBacklog{Retention: 500}}
	txs := []LongTx{{Start: at(10), End: at(70)}, {Start: at(100), End: at(160)}}
	passes := []Pass{{Start: at(60), Stats: behind}, {Start: at(72), Stats: behind}, {Start: at(80), MS: 500},
		{Start: at(150), Stats: behind}, {Start: at(170), Stats: behind}}
	got := caughtUp(txs, passes)
	if got[0].CaughtUp == nil || !got[0].CaughtUp.Equal(at(80).Add(500*time.Millisecond)) || got[0].MaxBacklog.Retention != 500 {
		t.Errorf("first long transaction: %+v", got[0])
	}
	if got[1].CaughtUp != nil {
		t.Errorf("second long transaction caught up by %v, though every pass after it was behind", got[1].CaughtUp)
	}
	if c := backlogCheck(got, 2); c.Pass {
		t.Errorf("the backlog check passes: %+v", c)
	}
	passes = append(passes, Pass{Start: at(175)})
	if c := backlogCheck(caughtUp(txs, passes), 2); !c.Pass {
		t.Errorf("the backlog check fails: %+v", c)
	}
}

// The backlog is on by default, smaller in the short form, and off when
// negative.
func TestBacklogConfig(t *testing.T) {
	for _, c := range []struct {
		cfg             Config
		backlog, parts  int
		settingsBacklog int
	}{
		{Config{URL: "x"}, DefaultBacklog, DefaultBacklogPartitions, DefaultBacklog},
		{Config{URL: "x", Short: true}, ShortBacklog, ShortBacklogPartitions, ShortBacklog},
		{Config{URL: "x", Backlog: -5}, -1, DefaultBacklogPartitions, 0},
		{Config{URL: "x", Backlog: 2_000_000, BacklogPartitions: 7}, 2_000_000, 7, 2_000_000},
	} {
		got := c.cfg.WithDefaults()
		if got.Backlog != c.backlog || got.BacklogPartitions != c.parts || settingsOf(got).Backlog != c.settingsBacklog {
			t.Errorf("%+v: backlog %d over %d partitions (settings %d), want %d over %d (%d)", c.cfg, got.Backlog,
				got.BacklogPartitions, settingsOf(got).Backlog, c.backlog, c.parts, c.settingsBacklog)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
}

// What the routines cost is compared between the first and the last third,
// leaving out the first interval (it holds what came before the steady
// phase), the costliest over the last third first.
func TestRoutineThirds(t *testing.T) {
	cfg := Config{URL: "x", Duration: 3 * time.Minute, SampleEvery: 10 * time.Second}
	var samples []Sample
	for s := 0; s <= 180; s += 10 {
		r := map[string]Routine{"push": {Calls: 10, MS: 10}, "reap": {Calls: 5, MS: 5}}
		if s > 120 {
			r["reap"] = Routine{Calls: 5, MS: 50}
		}
		if s <= 10 {
			r["push"] = Routine{Calls: 1000, MS: 1}
		}
		samples = append(samples, Sample{ElapsedS: float64(s), Routines: r})
	}
	got := routineThirds(samples, cfg)
	if len(got) != 2 || got[0].Name != "reap" || got[1].Name != "push" {
		t.Fatalf("routines %+v, want reap then push", got)
	}
	reap, push := got[0], got[1]
	if reap.First.perCall() != 1 || reap.Last.perCall() != 10 || reap.Last.Calls != 30 {
		t.Errorf("reap: %+v, want 1 ms per call, then 10 ms over 30 calls", reap)
	}
	if push.First.Calls != 50 || push.First.perCall() != 1 {
		t.Errorf("push: %+v, want the first third without its first interval: 50 calls of 1 ms", push)
	}
}
