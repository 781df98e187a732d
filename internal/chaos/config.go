package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Defaults of Config.
const (
	// DefaultDuration is how long a full run produces and injects faults
	// (the drain and the checks come after).
	DefaultDuration = 3 * time.Minute
	// DefaultProducers is the number of concurrent producers.
	DefaultProducers = 4
	// DefaultShortProducers is the number of producers of a short run:
	// fewer, so the groups keep up and the drain is quick.
	DefaultShortProducers = 2
	// DefaultGroups is the number of consumer groups: the queue-mode group
	// and DefaultGroups-1 named ones.
	DefaultGroups = 3
	// DefaultConsumersPerGroup is the number of consumers in each group.
	DefaultConsumersPerGroup = 2
	// DefaultPartitions is the number of partitions producers push to.
	DefaultPartitions = 12
	// DefaultLeaseTime is the queue's leaseTime in seconds: short, so leases
	// a fault orphaned expire (and count an attempt) within the run.
	DefaultLeaseTime = 3
	// DefaultRetryLimit is the queue's retryLimit: low, so failed acks and
	// expiries dead-letter messages during the run.
	DefaultRetryLimit = 2
	// DefaultMinGap and DefaultMaxGap bound the time from one fault's
	// recovery to the next fault.
	DefaultMinGap = 4 * time.Second
	DefaultMaxGap = 9 * time.Second
	// DefaultShortGap is the traffic before, between and after the faults
	// of a short run.
	DefaultShortGap = 2 * time.Second
	// DefaultMaxDown bounds how long a kill keeps the database or the
	// pooler down before it is started again.
	DefaultMaxDown = 2 * time.Second
	// DefaultMaxStall bounds how long a stall keeps the database stopped.
	DefaultMaxStall = 3 * time.Second
	// DefaultRecoveryTimeout is how long the service may take to answer a
	// request successfully after a fault ended before the run fails.
	DefaultRecoveryTimeout = time.Minute
	// DefaultDrainTimeout bounds the drain after the last fault: every group
	// must have consumed (or dead-lettered) every message by then.
	DefaultDrainTimeout = 2 * time.Minute
	// DefaultRequestTimeout is the workload's HTTP client timeout: longer
	// than any fault, so requests ride out stalls.
	DefaultRequestTimeout = 30 * time.Second
)

// ServeFunc runs `queen serve` until ctx ends: its flags, its environment
// (read through getenv) and where its banner and log go. cmd/queen's serve
// has this signature.
type ServeFunc func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// Config configures Run. The zero value of every field but Serve means its
// default.
type Config struct {
	// Serve runs the server under test. Required.
	Serve ServeFunc
	// Out receives the progress and the report. Default io.Discard.
	Out io.Writer
	// Seed drives every random choice (workload and fault schedule); 0
	// picks one from the clock. The report prints it.
	Seed uint64
	// Short runs the short schedule: one postmaster kill (down MaxDown/2),
	// then one PgBouncer restart (down MaxDown/4), each after a few
	// seconds of traffic, instead of random faults for Duration.
	Short bool
	// Duration of the produce-and-fault phase of a full run.
	Duration time.Duration

	Producers, Groups, ConsumersPerGroup, Partitions int
	LeaseTime, RetryLimit                            int

	MinGap, MaxGap, MaxDown, MaxStall             time.Duration
	RecoveryTimeout, DrainTimeout, RequestTimeout time.Duration
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	set := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setD := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	setD(&c.Duration, DefaultDuration)
	set(&c.Producers, DefaultProducers)
	set(&c.Groups, DefaultGroups)
	set(&c.ConsumersPerGroup, DefaultConsumersPerGroup)
	set(&c.Partitions, DefaultPartitions)
	set(&c.LeaseTime, DefaultLeaseTime)
	set(&c.RetryLimit, DefaultRetryLimit)
	if c.Short {
		setD(&c.MinGap, DefaultShortGap)
		set(&c.Producers, DefaultShortProducers)
	}
	setD(&c.MinGap, DefaultMinGap)
	setD(&c.MaxGap, DefaultMaxGap)
	setD(&c.MaxDown, DefaultMaxDown)
	setD(&c.MaxStall, DefaultMaxStall)
	setD(&c.RecoveryTimeout, DefaultRecoveryTimeout)
	setD(&c.DrainTimeout, DefaultDrainTimeout)
	setD(&c.RequestTimeout, DefaultRequestTimeout)
	return c
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if c.Serve == nil {
		errs = append(errs, errors.New("no server to test: Serve is required"))
	}
	positive := map[string]int{"Producers": c.Producers, "Groups": c.Groups, "ConsumersPerGroup": c.ConsumersPerGroup,
		"Partitions": c.Partitions, "LeaseTime": c.LeaseTime, "RetryLimit": c.RetryLimit}
	for _, name := range []string{"Producers", "Groups", "ConsumersPerGroup", "Partitions", "LeaseTime", "RetryLimit"} {
		if positive[name] < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1, got %d", name, positive[name]))
		}
	}
	if c.Duration < time.Second {
		errs = append(errs, fmt.Errorf("the duration must be at least 1s, got %v", c.Duration))
	}
	if c.MinGap <= 0 || c.MaxGap < c.MinGap {
		errs = append(errs, fmt.Errorf("need 0 < MinGap <= MaxGap, got %v and %v", c.MinGap, c.MaxGap))
	}
	if c.MaxDown < 0 {
		errs = append(errs, fmt.Errorf("MaxDown must not be negative, got %v", c.MaxDown))
	}
	if c.MaxStall < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("MaxStall must be at least 100ms, got %v", c.MaxStall))
	}
	for name, d := range map[string]time.Duration{"RecoveryTimeout": c.RecoveryTimeout, "DrainTimeout": c.DrainTimeout,
		"RequestTimeout": c.RequestTimeout} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %v", name, d))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("chaos: invalid config: %w", errors.Join(errs...))
	}
	return nil
}
