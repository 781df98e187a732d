package pgstore

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// A plain payload is stored as json.Marshal compacts it, whichever way
// storedPayload takes: the same text for payloads with and without
// whitespace, HTML characters, U+2028 / U+2029 and other multi-byte text.
func TestStoredPayloadIsMarshalsCompactForm(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	pieces := []string{"a", "Z", "0", " ", "\t", "\n", "<", ">", "&", "\u2028", "\u2029", "é", "€", "\u2000", `\"`, `\\`,
		`\u003c`, `\n`, "🙂"}
	str := func() string {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(6) {
			p := pieces[rng.IntN(len(pieces))]
			if p == "\t" || p == "\n" { // raw control characters are not valid inside a JSON string
				p = " "
			}
			b.WriteString(p)
		}
		b.WriteByte('"')
		return b.String()
	}
	ws := func() string { return []string{"", "", " ", "\n  ", "\t", "\r\n"}[rng.IntN(6)] }
	var value func(depth int) string
	value = func(depth int) string {
		switch k := rng.IntN(7); {
		case k == 0 && depth < 3:
			var parts []string
			for range rng.IntN(4) {
				parts = append(parts, ws()+str()+ws()+":"+ws()+value(depth+1)+ws())
			}
			return "{" + strings.Join(parts, ",") + ws() + "}"
		case k == 1 && depth < 3:
			var parts []string
			for range rng.IntN(4) {
				parts = append(parts, ws()+value(depth+1)+ws())
			}
			return "[" + strings.Join(parts, ",") + ws() + "]"
		case k == 2:
			return []string{"true", "false", "null", "-1.5e3", "12345", "0"}[rng.IntN(6)]
		default:
			return str()
		}
	}
	cases := []string{`{"hello":"world","n":12345}`, `{"a": 1}`, `"<b>&"`, `["\u2028"]`, "\"\u2028\"", "\"\u2029x\"",
		`{"k":"é€🙂"}`, " 1", `null`}
	for range 3000 {
		cases = append(cases, ws()+value(0)+ws())
	}
	fast := 0
	for _, c := range cases {
		if !json.Valid([]byte(c)) {
			t.Fatalf("the generator made invalid JSON: %q", c)
		}
		want, err := json.Marshal(json.RawMessage(c))
		if err != nil {
			t.Fatal(err)
		}
		got, err := storedPayload(json.RawMessage(c))
		if err != nil || got != string(want) {
			t.Errorf("storedPayload(%q) = %q, %v; json.Marshal gives %q", c, got, err, want)
		}
		if c == string(want) {
			fast++
		}
	}
	if fast == 0 || fast == len(cases) {
		t.Errorf("%d of %d payloads were already compact: the cases miss one of the two ways", fast, len(cases))
	}
}
