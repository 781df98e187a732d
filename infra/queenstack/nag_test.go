package queenstack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// Every variant passes cdk-nag's AwsSolutions and Serverless packs: each finding is
// either fixed or suppressed in the stack's code with its reason (nag.go).
func TestCdkNag(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		for _, f := range s.nag {
			t.Errorf("cdk-nag: %s", f)
		}
	})
}

// CDK itself has nothing to warn about in any variant (a warning names a setting that
// does not do what the stack means, e.g. Performance Insights the instances disagree on),
// nor the stack but for the IPv6 entries of a URL allow list, which open nothing
// (TestDispatchURLEgress checks that warning).
func TestNoCDKWarnings(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		_, ipv6 := urlEgressRanges(s.stack.Props.SubscriptionURLAllow, vpcIPv6)
		for _, w := range s.warnings {
			if len(ipv6) > 0 && strings.Contains(w, "[ack: "+urlAllowIPv6Warning+"]") {
				continue
			}
			t.Errorf("CDK: %s", w)
		}
	})
}

// The stack checks itself: `cdk synth` (and so `cdk deploy`) of an app holding it fails
// on a cdk-nag error, with cdk.json's feature flags, without anything the tests add.
func TestCdkNagFailsTheSynth(t *testing.T) {
	ctx, err := cdkContext()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, AnalyticsReporting: jsii.Bool(false), Outdir: jsii.String(out)})
	st, err := New(app, "QueenNagTest", nil, Props{AssetsDir: assetsDir, MigrationNonce: "n"})
	if err != nil {
		t.Fatal(err)
	}
	// A queue without TLS enforcement or a DLQ: AwsSolutions-SQS3/SQS4 errors.
	awssqs.NewQueue(st.Stack, jsii.String("Noncompliant"), &awssqs.QueueProps{})
	err = func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		app.Synth(nil)
		return nil
	}()
	if err == nil || !strings.Contains(err.Error(), "Validation failed") {
		t.Fatalf("synth of a stack with a non-compliant queue: %v, want a failed validation", err)
	}
	report, err := os.ReadFile(filepath.Join(out, "validation-report.json"))
	if err != nil || !strings.Contains(string(report), "AwsSolutions-SQS4") {
		t.Errorf("validation report %s (%v), want the queue's AwsSolutions-SQS4 finding", report, err)
	}
}
