package queenstack

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// assetsDir holds placeholder bootstraps, one distinct file per function, for the
// whole test binary.
var assetsDir string

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "queen-infra-assets-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if err := writePlaceholderAssets(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		assetsDir = dir
		return m.Run()
	}()
	jsii.Close()
	os.Exit(code)
}

func writePlaceholderAssets(dir string) error {
	for _, name := range append(slices.Clip(FunctionNames), DispatchFunction) {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name, "bootstrap"), []byte("placeholder "+name+"\n"), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// synthesized is one stack variant and its CloudFormation template.
type synthesized struct {
	stack    *Stack
	template assertions.Template
	// json is the template as plain Go values.
	json map[string]any
	// nag is every unsuppressed cdk-nag finding (AwsSolutions and Serverless packs),
	// as "<construct path>: <rule>: <message>".
	nag []string
	// warnings are CDK's own warning and error annotations (not cdk-nag's).
	warnings []string
}

// variant synthesizes props once per test binary and shares the result.
type variant struct {
	once  sync.Once
	props func() Props
	s     *synthesized
	err   error
}

func (v *variant) get(t *testing.T) *synthesized {
	t.Helper()
	v.once.Do(func() { v.s, v.err = synth(v.props()) })
	if v.err != nil {
		t.Fatalf("synth: %v", v.err)
	}
	return v.s
}

var (
	// defaults: RDS instance, IAM authorizer, ingest queue on, 1-minute reaper, SNAPSHOT.
	defaults = &variant{props: func() Props {
		return Props{AssetsDir: assetsDir, MigrationNonce: "nonce-1"}
	}}
	// custom: Aurora Serverless v2, JWT authorizer, no ingest queue, 5-minute reaper,
	// RETAIN, custom thresholds, custom reserved concurrency, messages kept for ever
	// but consumed ones an hour, no nonce.
	custom = &variant{props: func() Props {
		no := false
		return Props{
			AssetsDir:         assetsDir,
			Engine:            EngineAurora,
			Authorizer:        AuthorizerJWT,
			JWTIssuer:         "https://issuer.example.com/",
			JWTAudience:       []string{"queen-api", "queen-cli"},
			IngestQueue:       &no,
			ReaperRateMinutes: 5,
			RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
			DLQDepthThreshold: 3,
			GroupLagThreshold: 500,
			LogRetentionDays:  90,

			DefaultRetentionSeconds:          KeepForever,
			DefaultCompletedRetentionSeconds: 3600,

			PopReservedConcurrency:   Unreserved,
			PushReservedConcurrency:  40,
			AckReservedConcurrency:   25,
			DLQReservedConcurrency:   2,
			AdminReservedConcurrency: 3,
		}
	}}
	// production: the production profile of cdk.json, read by PropsFromContext as
	// `cdk deploy` would with "profile": "production" and the keys it requires.
	production = &variant{props: func() Props {
		ctx, err := cdkContext()
		if err != nil {
			panic(err)
		}
		ctx["profile"], ctx["alarmEmail"], ctx["authorizer"] = ProfileProduction, "ops@example.com", "iam"
		p, err := PropsFromContext(func(k string) any { return ctx[k] })
		if err != nil {
			panic(err)
		}
		p.AssetsDir, p.MigrationNonce = assetsDir, "nonce-1"
		return p
	}}
	// subscriptions: the defaults with subscription targets of each form (a name, a
	// name with its alias, a qualified ARN of another account, an unqualified one)
	// and a dispatcher reservation.
	subscriptions = &variant{props: func() Props {
		return Props{
			AssetsDir: assetsDir, MigrationNonce: "nonce-1",
			SubscriptionTargets:         testSubscriptionTargets,
			DispatchReservedConcurrency: 5,
		}
	}}
	// subscriptionURLs: the defaults with URL targets allowed and no function declared.
	subscriptionURLs = &variant{props: func() Props {
		return Props{AssetsDir: assetsDir, MigrationNonce: "nonce-1", SubscriptionURLAllow: testSubscriptionURLAllow}
	}}
	// subscriptionsBoth: the declared functions of subscriptions, and public URL targets.
	subscriptionsBoth = &variant{props: func() Props {
		return Props{
			AssetsDir: assetsDir, MigrationNonce: "nonce-1",
			SubscriptionTargets:  testSubscriptionTargets,
			SubscriptionURLAllow: []string{"public"},
		}
	}}
	// subscriptionCIDRs: URL targets by range and address only (one range inside
	// another), on a port beyond 80 and 443.
	subscriptionCIDRs = &variant{props: func() Props {
		return Props{
			AssetsDir: assetsDir, MigrationNonce: "nonce-1",
			SubscriptionURLAllow: testSubscriptionCIDRs,
			SubscriptionURLPorts: []float64{8443},
		}
	}}
	variants = map[string]*variant{
		"defaults": defaults, "custom": custom, "production": production,
		"subscriptions": subscriptions, "subscriptionURLs": subscriptionURLs, "subscriptionsBoth": subscriptionsBoth,
		"subscriptionCIDRs": subscriptionCIDRs,
	}
)

// synth builds the stack in an app carrying the feature flags of cdk.json, so the
// tests see the template `cdk synth` writes.
func synth(p Props) (s *synthesized, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	ctx, err := cdkContext()
	if err != nil {
		return nil, err
	}
	// Error annotations (cdk-nag's error-level findings) would otherwise fail the whole
	// synth and with it every test of the variant; TestCdkNag reports them instead.
	// The flag changes no template.
	ctx["@aws-cdk/core:annotationsInValidationReport"] = false
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, AnalyticsReporting: jsii.Bool(false)})
	st, err := New(app, "QueenTest", nil, p)
	if err != nil {
		return nil, err
	}
	// cdk-nag (applied by New) checks every variant during the same synth.
	tmpl := assertions.Template_FromStack(st.Stack, nil)
	out := &synthesized{stack: st, template: tmpl, json: *tmpl.ToJSON()}
	annotations := assertions.Annotations_FromStack(st.Stack)
	any := assertions.Match_StringLikeRegexp(jsii.String(".*"))
	for _, msgs := range []*[]*cxapi.SynthesisMessage{annotations.FindError(jsii.String("*"), any), annotations.FindWarning(jsii.String("*"), any)} {
		for _, m := range *msgs {
			text := fmt.Sprint(m.Entry.Data)
			if isNagFinding(text) {
				out.nag = append(out.nag, *m.Id+": "+text)
			} else {
				out.warnings = append(out.warnings, *m.Id+": "+text)
			}
		}
	}
	sort.Strings(out.nag)
	return out, nil
}

// isNagFinding reports whether an annotation is cdk-nag's: a rule of NagPacks, or a
// rule that could not be evaluated.
func isNagFinding(text string) bool {
	for _, pack := range NagPacks {
		if strings.HasPrefix(text, pack+"-") {
			return true
		}
	}
	return strings.HasPrefix(text, "CdkNagValidationFailure")
}

// cdkContext is the context of cdk.json.
func cdkContext() (map[string]any, error) {
	raw, err := os.ReadFile(filepath.Join("..", "cdk.json"))
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("cdk.json: %w", err)
	}
	return cfg.Context, nil
}

// forEachVariant runs fn as a parallel subtest per variant.
func forEachVariant(t *testing.T, fn func(t *testing.T, s *synthesized)) {
	names := make([]string, 0, len(variants))
	for n := range variants {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := variants[n]
		t.Run(n, func(t *testing.T) { fn(t, v.get(t)) })
	}
}

// resources returns the template's resources of one type by logical id.
func (s *synthesized) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.json["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

// one returns the single resource of a type, failing otherwise.
func (s *synthesized) one(t *testing.T, typ string) (string, map[string]any) {
	t.Helper()
	rs := s.resources(typ)
	if len(rs) != 1 {
		t.Fatalf("want exactly one %s, got %d", typ, len(rs))
	}
	for id, r := range rs {
		return id, r
	}
	panic("unreachable")
}

// id is the logical id of a construct's CloudFormation resource.
func (s *synthesized) id(c constructs.IConstruct) string {
	if el, ok := c.(awscdk.CfnElement); ok {
		return *s.stack.GetLogicalId(el)
	}
	return *s.stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

// functionIDs maps logical id to function name.
func (s *synthesized) functionIDs() map[string]string {
	out := map[string]string{}
	for name, fn := range s.stack.Functions {
		out[s.id(fn)] = name
	}
	return out
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// path walks nested maps and slices: path(v, "A", "B", 0).
func path(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func dependsOn(r map[string]any) []string {
	var out []string
	switch d := r["DependsOn"].(type) {
	case string:
		out = append(out, d)
	case []any:
		for _, x := range d {
			out = append(out, x.(string))
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// getAtt returns the logical id of {"Fn::GetAtt": [id, attr]} or "".
func getAtt(v any, attr string) string {
	a, ok := path(v, "Fn::GetAtt").([]any)
	if !ok || len(a) != 2 || a[1] != attr {
		return ""
	}
	return a[0].(string)
}

func ref(v any) string {
	s, _ := path(v, "Ref").(string)
	return s
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// render is a CloudFormation string value as text, with ${Id} for a Ref and
// ${Id.Attr} for a Fn::GetAtt, e.g. the JSON a custom resource gets.
func render(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		if r, ok := v["Ref"].(string); ok {
			return "${" + r + "}"
		}
		if a, ok := v["Fn::GetAtt"].([]any); ok && len(a) == 2 {
			return fmt.Sprintf("${%v.%v}", a[0], a[1])
		}
		if j, ok := v["Fn::Join"].([]any); ok && len(j) == 2 {
			var parts []string
			for _, x := range asList(j[1]) {
				parts = append(parts, render(x))
			}
			return strings.Join(parts, fmt.Sprint(j[0]))
		}
	}
	return fmt.Sprint(v)
}

// literals collects every string literal inside a CloudFormation value, i.e. the parts
// of Fn::Join and the plain strings, but not logical ids of Ref/GetAtt.
func literals(v any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for k, x := range v {
				if k == "Ref" || k == "Fn::GetAtt" {
					continue
				}
				walk(x)
			}
		}
	}
	walk(v)
	return out
}

func asStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func asList(v any) []any {
	if a, ok := v.([]any); ok {
		return a
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

func equal(a, b any) bool { return reflect.DeepEqual(a, b) }

// hasPrefixFold is strings.HasPrefix ignoring case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
