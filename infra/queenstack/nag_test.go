package queenstack

import "testing"

// Every variant passes cdk-nag's AwsSolutions and Serverless packs: each finding is
// either fixed or suppressed in the stack's code with its reason (nag.go).
func TestCdkNag(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		for _, f := range s.nag {
			t.Errorf("cdk-nag: %s", f)
		}
	})
}
