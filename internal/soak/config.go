package soak

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Defaults of Config for the full run (`make soak`).
const (
	// DefaultDuration is the steady phase of a full run.
	DefaultDuration = 30 * time.Minute
	// DefaultFraction is the share of the measured P10 rate pushed
	// steadily. Each message is delivered to three groups and acked, so
	// the steady phase costs the machine about four times what its pushes
	// cost: at 25 % a 2-core machine saturates and the groups fall behind
	// without bound, which is a test of overload, not of housekeeping.
	DefaultFraction = 0.10
	// DefaultMeasureFor is how long the P10 rate is measured.
	DefaultMeasureFor = 10 * time.Second
	// DefaultMeasureClients push concurrently while the rate is measured
	// (as `make bench`'s P10).
	DefaultMeasureClients = 8
	// DefaultPartitions is the number of partitions pushes spread over.
	DefaultPartitions = 1000
	// DefaultGroups is the number of consumer groups reading everything.
	DefaultGroups = 3
	// DefaultConsumersPerGroup is the number of consumers in each group.
	DefaultConsumersPerGroup = 2
	// DefaultProducers is the number of concurrent producers.
	DefaultProducers = 8
	// DefaultPushItems is the items of every push (P10's).
	DefaultPushItems = 10
	// DefaultPopBatch and DefaultPopPartitions shape each pop: up to
	// DefaultPopBatch messages from up to DefaultPopPartitions partitions.
	DefaultPopBatch      = 100
	DefaultPopPartitions = 10
	// DefaultWork is the most a consumer spends on a batch before it acks
	// (uniform from a fifth of it): its processing.
	DefaultWork = 30 * time.Millisecond
	// DefaultRetention is the queue's retentionSeconds.
	DefaultRetention = 3 * time.Minute
	// DefaultDedupWindow is the queue's dedupWindowSeconds.
	DefaultDedupWindow = time.Minute
	// DefaultLeaseTime is the queue's leaseTime in seconds.
	DefaultLeaseTime = 15
	// DefaultRetryLimit is the queue's retryLimit: a poison message is
	// dead-lettered on its third failed attempt.
	DefaultRetryLimit = 2
	// DefaultPoisonEvery makes one message in this many a poison message,
	// failed by every consumer until it is dead-lettered.
	DefaultPoisonEvery = 2000
	// DefaultReaperInterval is the period of the in-process reaper loop;
	// each pass has the interval as its time budget.
	DefaultReaperInterval = 2 * time.Second
	// DefaultSampleEvery is the period of the progress line and the
	// recorded sample.
	DefaultSampleEvery = time.Minute
	// DefaultLongTxEvery is the period of the long read transaction (the
	// first opens after half of it), DefaultLongTxFor how long each stays
	// open.
	DefaultLongTxEvery = 5 * time.Minute
	DefaultLongTxFor   = time.Minute
	// DefaultDrainTimeout bounds the drain after the steady phase.
	DefaultDrainTimeout = 3 * time.Minute
	// DefaultRequestTimeout is the HTTP client's timeout.
	DefaultRequestTimeout = time.Minute
	// DefaultBacklog is the messages of the stored backlog, over
	// DefaultBacklogPartitions partitions: not due during the run.
	DefaultBacklog           = 1_000_000
	DefaultBacklogPartitions = 100_000
	// DefaultResultsDir receives results.json and results.svg.
	DefaultResultsDir = "soak-results"

	// MaxSizeGrowth is the largest growth of the total size over the last
	// third of the steady phase that counts as a plateau.
	MaxSizeGrowth = 0.05
	// MaxP99Ratio is the largest ratio of the last third's p99 to the
	// first third's, per operation.
	MaxP99Ratio = 1.5
)

// Defaults of the short form (Config.Short), the one `make test` runs.
const (
	ShortDuration       = 100 * time.Second
	ShortMaxRate        = 150 // messages/s: modest under the race detector
	ShortMeasureFor     = 3 * time.Second
	ShortRetention      = 45 * time.Second
	ShortReaperInterval = time.Second
	ShortSampleEvery    = 10 * time.Second
	// ShortLongTxEvery opens the short form's one long transaction after
	// 15 s (half of it); the next would not end in time.
	ShortLongTxEvery   = 30 * time.Second
	ShortDrainTimeout  = time.Minute
	ShortPollTimeoutMS = 1000
	// ShortBacklog and ShortBacklogPartitions: a small backlog, so that
	// its code path runs in CI at little cost.
	ShortBacklog           = 50_000
	ShortBacklogPartitions = 5_000
)

// Config configures Run. The zero value of every field but URL means its
// default (the short form's when Short is set).
type Config struct {
	// URL is a migrated database of the run's own: it fills it, and the
	// sizes it reports are that database's schema queen.
	URL string
	// Out receives the progress lines and the report. Default io.Discard.
	Out io.Writer
	// ServerLog receives the in-process server's log (warnings and
	// errors). Default io.Discard.
	ServerLog io.Writer
	// Seed drives every random choice; 0 picks one from the clock. The
	// report prints it.
	Seed uint64
	// Short is the short form: two minutes, lower load, one long
	// transaction; the size and latency checks are reported, not enforced.
	Short bool

	// Duration of the steady phase (the P10 measurement comes before it,
	// the drain and the checks after it).
	Duration time.Duration
	// Fraction of the measured P10 rate pushed steadily.
	Fraction float64
	// Rate, when set, is the steady push rate in messages per second and
	// the P10 rate is not measured.
	Rate float64
	// MaxRate caps the steady rate (0: no cap).
	MaxRate    float64
	MeasureFor time.Duration

	Partitions, Groups, ConsumersPerGroup, Producers int
	PushItems, PopBatch, PopPartitions               int
	Work                                             time.Duration

	Retention, DedupWindow time.Duration
	LeaseTime, RetryLimit  int
	PoisonEvery            int

	// Backlog is the messages stored, before the traffic starts, in a
	// queue of their own with a window of BacklogWindow, over
	// BacklogPartitions partitions; negative: no backlog.
	Backlog, BacklogPartitions int

	ReaperInterval, SampleEvery time.Duration
	LongTxEvery, LongTxFor      time.Duration
	DrainTimeout                time.Duration
	RequestTimeout              time.Duration

	// ResultsDir receives results.json and results.svg. Default
	// DefaultResultsDir.
	ResultsDir string
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.ServerLog == nil {
		c.ServerLog = io.Discard
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	setD := func(p *time.Duration, full, short time.Duration) {
		if *p == 0 {
			*p = full
			if c.Short {
				*p = short
			}
		}
	}
	set := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setD(&c.Duration, DefaultDuration, ShortDuration)
	setD(&c.MeasureFor, DefaultMeasureFor, ShortMeasureFor)
	setD(&c.Retention, DefaultRetention, ShortRetention)
	setD(&c.DedupWindow, DefaultDedupWindow, DefaultDedupWindow)
	setD(&c.ReaperInterval, DefaultReaperInterval, ShortReaperInterval)
	setD(&c.SampleEvery, DefaultSampleEvery, ShortSampleEvery)
	setD(&c.LongTxEvery, DefaultLongTxEvery, ShortLongTxEvery)
	setD(&c.LongTxFor, DefaultLongTxFor, DefaultLongTxFor)
	setD(&c.DrainTimeout, DefaultDrainTimeout, ShortDrainTimeout)
	setD(&c.RequestTimeout, DefaultRequestTimeout, DefaultRequestTimeout)
	setD(&c.Work, DefaultWork, DefaultWork)
	if c.Fraction == 0 {
		c.Fraction = DefaultFraction
	}
	if c.MaxRate == 0 && c.Short {
		c.MaxRate = ShortMaxRate
	}
	set(&c.Partitions, DefaultPartitions)
	set(&c.Groups, DefaultGroups)
	set(&c.ConsumersPerGroup, DefaultConsumersPerGroup)
	set(&c.Producers, DefaultProducers)
	set(&c.PushItems, DefaultPushItems)
	set(&c.PopBatch, DefaultPopBatch)
	set(&c.PopPartitions, DefaultPopPartitions)
	set(&c.LeaseTime, DefaultLeaseTime)
	set(&c.RetryLimit, DefaultRetryLimit)
	set(&c.PoisonEvery, DefaultPoisonEvery)
	if c.Short {
		set(&c.Backlog, ShortBacklog)
		set(&c.BacklogPartitions, ShortBacklogPartitions)
	}
	set(&c.Backlog, DefaultBacklog)
	set(&c.BacklogPartitions, DefaultBacklogPartitions)
	c.Backlog = max(c.Backlog, -1)
	if c.ResultsDir == "" {
		c.ResultsDir = DefaultResultsDir
	}
	return c
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, errors.New("no database: URL is required"))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Partitions", c.Partitions}, {"Groups", c.Groups}, {"ConsumersPerGroup", c.ConsumersPerGroup},
		{"Producers", c.Producers}, {"PushItems", c.PushItems}, {"PopBatch", c.PopBatch},
		{"PopPartitions", c.PopPartitions}, {"LeaseTime", c.LeaseTime}, {"RetryLimit", c.RetryLimit},
		{"PoisonEvery", c.PoisonEvery}, {"BacklogPartitions", c.BacklogPartitions}} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1, got %d", f.name, f.v))
		}
	}
	if c.Fraction <= 0 || c.Fraction > 1 {
		errs = append(errs, fmt.Errorf("the fraction of the P10 rate must be in (0, 1], got %v", c.Fraction))
	}
	if c.Rate < 0 || c.MaxRate < 0 {
		errs = append(errs, fmt.Errorf("rates must not be negative, got %v and %v", c.Rate, c.MaxRate))
	}
	for _, f := range []struct {
		name string
		min  time.Duration
		v    time.Duration
	}{{"Duration", 10 * time.Second, c.Duration}, {"MeasureFor", 100 * time.Millisecond, c.MeasureFor},
		{"Retention", time.Second, c.Retention}, {"DedupWindow", time.Second, c.DedupWindow},
		{"ReaperInterval", 100 * time.Millisecond, c.ReaperInterval}, {"SampleEvery", time.Second, c.SampleEvery},
		{"LongTxEvery", time.Second, c.LongTxEvery}, {"LongTxFor", time.Second, c.LongTxFor},
		{"DrainTimeout", time.Second, c.DrainTimeout}, {"RequestTimeout", time.Second, c.RequestTimeout}} {
		if f.v < f.min {
			errs = append(errs, fmt.Errorf("%s must be at least %v, got %v", f.name, f.min, f.v))
		}
	}
	if c.Retention%time.Second != 0 || c.DedupWindow%time.Second != 0 {
		errs = append(errs, fmt.Errorf("the retention and the dedup window are whole seconds, got %v and %v", c.Retention, c.DedupWindow))
	}
	if len(errs) > 0 {
		return fmt.Errorf("soak: invalid config: %w", errors.Join(errs...))
	}
	return nil
}

// longTxStarts are the offsets into the steady phase at which the long
// transactions open: the first after half a period, then one per period,
// each ending at least a quarter of LongTxFor before the steady phase
// ends, so that the reaper catches up after the last one under load.
func (c Config) longTxStarts() []time.Duration {
	var out []time.Duration
	for at := c.LongTxEvery / 2; at+c.LongTxFor+c.LongTxFor/4 <= c.Duration; at += c.LongTxEvery {
		out = append(out, at)
	}
	return out
}
