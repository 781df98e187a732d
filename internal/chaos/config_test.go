package chaos

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	c := Config{Serve: func(context.Context, []string, func(string) string, io.Writer, io.Writer) error { return nil }}.WithDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if c.Duration != DefaultDuration || c.MinGap != DefaultMinGap || c.Seed == 0 {
		t.Errorf("defaults: %+v", c)
	}
	if s := (Config{Short: true}).WithDefaults(); s.MinGap != DefaultShortGap {
		t.Errorf("short gap %v, want %v", s.MinGap, DefaultShortGap)
	}
	err := Config{Producers: -1, MinGap: 5, MaxGap: 1}.WithDefaults().Validate()
	for _, want := range []string{"Serve is required", "Producers must be at least 1", "MinGap <= MaxGap"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want it to say %q", err, want)
		}
	}
}
