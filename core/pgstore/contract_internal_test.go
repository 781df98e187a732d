package pgstore

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// Every reply of every routine in pgstore's tests is checked against the
// Go type it is decoded into.
func init() { contractCheck = checkKeys }

// checkKeys reports keys of raw that out's type does not read, and keys
// it reads (without omitempty) that raw lacks, at any depth.
func checkKeys(raw []byte, out any) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	var problems []string
	compareKeys(v, reflect.TypeOf(out), "$", &problems)
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

var (
	rawMessageType = reflect.TypeOf(json.RawMessage(nil))
	timeType       = reflect.TypeOf(time.Time{})
)

func compareKeys(v any, t reflect.Type, path string, problems *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil || t == rawMessageType || t == timeType {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			*problems = append(*problems, fmt.Sprintf("%s: %T where %s wants an object", path, v, t))
			return
		}
		fields := map[string]reflect.StructField{}
		optional := map[string]bool{}
		jsonFields(t, fields, optional)
		for k := range obj {
			if _, ok := fields[k]; !ok {
				*problems = append(*problems, fmt.Sprintf("%s: key %q that %s does not read", path, k, t))
			}
		}
		for k, f := range fields {
			val, ok := obj[k]
			if !ok {
				if !optional[k] {
					*problems = append(*problems, fmt.Sprintf("%s: no key %q, which %s reads", path, k, t))
				}
				continue
			}
			compareKeys(val, f.Type, path+"."+k, problems)
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			*problems = append(*problems, fmt.Sprintf("%s: %T where %s wants an array", path, v, t))
			return
		}
		for i, e := range arr {
			compareKeys(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), problems)
		}
	}
}

// jsonFields collects t's JSON keys, flattening embedded structs as
// encoding/json does.
func jsonFields(t reflect.Type, fields map[string]reflect.StructField, optional map[string]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			jsonFields(ft, fields, optional)
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f
		optional[name] = strings.Contains(opts, "omitempty")
	}
}

// routineKeys returns, per routine of sql/routines/, the keys it reads
// from its JSON arguments (p_req, p_opts, p_target, and the item aliases
// i and t.i).
func routineKeys(t *testing.T) map[string][]string {
	b := []byte(routinesSQL)
	starts := regexp.MustCompile(`(?m)^CREATE OR REPLACE FUNCTION queen\.(\w+)\(`).FindAllStringSubmatchIndex(string(b), -1)
	read := regexp.MustCompile(`\b(?:p_req|p_opts|p_target|t\.i|i)\s*->>?\s*'(\w+)'`)
	recordset := regexp.MustCompile(`json_to_recordset\(\w+\) AS \(([^)]*)\)`)
	out := map[string][]string{}
	for n, m := range starts {
		end := len(b)
		if n+1 < len(starts) {
			end = starts[n+1][0]
		}
		name := string(b[m[2]:m[3]])
		var keys []string
		for _, k := range read.FindAllStringSubmatch(string(b[m[0]:end]), -1) {
			if !slices.Contains(keys, k[1]) {
				keys = append(keys, k[1])
			}
		}
		// json_to_recordset(...) AS (key type, "camelKey" type, ...)
		for _, cols := range recordset.FindAllStringSubmatch(string(b[m[0]:end]), -1) {
			for _, col := range strings.Split(cols[1], ",") {
				if k := strings.Trim(strings.Fields(col)[0], `"`); !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
		sort.Strings(keys)
		out[name] = keys
	}
	return out
}

// tagsOf returns the JSON keys a Go value writes: a struct type's tags, or
// a map's keys.
func tagsOf(v any) []string {
	if m, ok := v.(map[string]any); ok {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys
	}
	fields, optional := map[string]reflect.StructField{}, map[string]bool{}
	jsonFields(reflect.TypeOf(v), fields, optional)
	var out []string
	for k := range fields {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// everyOption is a QueueOptions with every option set.
func everyOption() queen.QueueOptions {
	var o queen.QueueOptions
	v := reflect.ValueOf(&o).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer {
			f.Set(reflect.New(f.Type().Elem()))
		}
	}
	return o
}

// The keys each routine reads from its JSON argument are exactly the keys
// the Go type that builds that argument writes.
func TestRoutinesReadTheKeysGoWrites(t *testing.T) {
	keys := routineKeys(t)
	for _, c := range []struct {
		routines []string // the routines that read the argument
		goType   any
		extra    []string // keys only other routines write (dlq_retry's snapshot flag)
	}{
		{[]string{"_pop", "pop"}, popArg{}, nil},
		{[]string{"_push_items"}, pushArg{}, []string{"snapshot"}},
		{[]string{"_ack_args"}, ackArg{}, nil},
		{[]string{"configure"}, optionsArgOf(everyOption()), nil},
		{[]string{"seek_v2"}, seekArg{}, nil},
	} {
		want := append(tagsOf(c.goType), c.extra...)
		sort.Strings(want)
		var got []string
		for _, r := range c.routines {
			for _, k := range keys[r] {
				if !slices.Contains(got, k) {
					got = append(got, k)
				}
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("queen.%s read %v; %T writes %v", strings.Join(c.routines, ", "), got, c.goType, want)
		}
	}
	// transact locks the cursors its acks name before _ack reads the rest.
	for _, k := range keys["transact"] {
		if !slices.Contains(tagsOf(ackArg{}), k) {
			t.Errorf("queen.transact reads %q, which ackArg does not write", k)
		}
	}
}

// The checker itself finds both kinds of drift.
func TestCheckKeysFindsDrift(t *testing.T) {
	type row struct {
		A int    `json:"a"`
		B string `json:"b,omitempty"`
	}
	if err := checkKeys([]byte(`[{"a":1}]`), &[]row{}); err != nil {
		t.Errorf("matching reply: %v", err)
	}
	if err := checkKeys([]byte(`[{"a":1,"c":2}]`), &[]row{}); err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Errorf("a key Go does not read: %v", err)
	}
	if err := checkKeys([]byte(`{"b":"x"}`), &row{}); err == nil || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("a key SQL does not write: %v", err)
	}
}

// The codes the routines raise are the ones interpretError maps.
func TestRaisedCodesAreMapped(t *testing.T) {
	b := []byte(routinesSQL)
	var raised []string
	for _, m := range regexp.MustCompile(`ERRCODE = '(QN\w+)'`).FindAllStringSubmatch(string(b), -1) {
		if !slices.Contains(raised, m[1]) {
			raised = append(raised, m[1])
		}
	}
	want := slices.Clone(sqlstates)
	sort.Strings(raised)
	sort.Strings(want)
	if !slices.Equal(raised, want) {
		t.Errorf("routines raise %v; interpretError maps %v", raised, want)
	}
}
