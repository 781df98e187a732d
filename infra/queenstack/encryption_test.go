package queenstack

import (
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
)

// wantKeyReaders are the functions that seal or open payloads of encrypted queues,
// written out independently of PayloadFunctions so that a wrong entry there fails here.
var wantKeyReaders = []string{"push", "pop", "ack", "dlq", "admin", "dispatch"}

// disposable is the DESTROY variant, synthesized only for the key's removal policy.
var disposable = &variant{props: func() Props {
	return Props{AssetsDir: assetsDir, MigrationNonce: "nonce-1", RemovalPolicy: awscdk.RemovalPolicy_DESTROY}
}}

// secretsManagerAlphabet is what Secrets Manager's password generator draws from, by
// class (GetRandomPassword: letters, digits, punctuation, optionally the space).
var secretsManagerAlphabet = map[string]string{
	"lowercase":   "abcdefghijklmnopqrstuvwxyz",
	"uppercase":   "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
	"numbers":     "0123456789",
	"punctuation": "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
}

// generatedAlphabet is the set of characters a GenerateSecretString can produce.
func generatedAlphabet(gen map[string]any) string {
	var b strings.Builder
	for class, chars := range secretsManagerAlphabet {
		if gen["Exclude"+strings.ToUpper(class[:1])+class[1:]] != true {
			b.WriteString(chars)
		}
	}
	if gen["IncludeSpace"] == true {
		b.WriteString(" ")
	}
	excluded, _ := gen["ExcludeCharacters"].(string)
	out := []rune{}
	for _, r := range b.String() {
		if !strings.ContainsRune(excluded, r) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return string(out)
}

func TestEncryptionKeySecretGeneratesAValidKey(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		id := s.id(s.stack.EncryptionKey)
		secret, ok := s.resources("AWS::SecretsManager::Secret")[id]
		if !ok {
			t.Fatalf("no encryption key secret %s in the template", id)
		}
		p := props(secret)
		if p["SecretString"] != nil {
			t.Errorf("the key's value is written into the template")
		}
		gen, _ := p["GenerateSecretString"].(map[string]any)
		if gen == nil {
			t.Fatalf("the key is not generated: %s", toJSON(t, p))
		}
		// The value must be the bare key (the ring's only key, k1), not a JSON document.
		if gen["GenerateStringKey"] != nil || gen["SecretStringTemplate"] != nil {
			t.Errorf("the key is generated into a JSON template, not as the bare key: %s", toJSON(t, gen))
		}
		// 32 bytes for AES-256, as 64 hex digits: the ring's parser takes the value as
		// hex only if every character is a hex digit and there are exactly 64.
		if got := generatedAlphabet(gen); got != "0123456789abcdef" {
			t.Errorf("generated characters %q, want exactly the lower-case hex digits", got)
		}
		if gen["PasswordLength"] != float64(64) {
			t.Errorf("PasswordLength %v, want 64 (32 bytes in hex)", gen["PasswordLength"])
		}
		// A rotation Lambda would replace the ring and lose every payload the old key
		// sealed; rotation is manual (prepend a new id:key).
		for rid, r := range s.resources("AWS::SecretsManager::RotationSchedule") {
			if ref(props(r)["SecretId"]) == id {
				t.Errorf("rotation schedule %s on the encryption key", rid)
			}
		}
		out, _ := path(s.json, "Outputs", "EncryptionKeySecretArn").(map[string]any)
		if ref(out["Value"]) != id {
			t.Errorf("EncryptionKeySecretArn output %s, want the key secret's ARN (Ref) only", toJSON(t, out["Value"]))
		}
		if d, _ := out["Description"].(string); d == "" {
			t.Errorf("EncryptionKeySecretArn output has no description")
		}
	})
}

// The key outlives the stack whenever the data does: with RETAIN the database is kept,
// with SNAPSHOT its final snapshot, and either holds payloads only this key opens.
func TestEncryptionKeyKeptWhileTheDataIs(t *testing.T) {
	for name, c := range map[string]struct {
		v    *variant
		want string
	}{
		"snapshot (defaults)": {defaults, "Retain"},
		"retain (custom)":     {custom, "Retain"},
		"destroy":             {disposable, "Delete"},
	} {
		t.Run(name, func(t *testing.T) {
			s := c.v.get(t)
			secret := s.resources("AWS::SecretsManager::Secret")[s.id(s.stack.EncryptionKey)]
			if secret["DeletionPolicy"] != c.want || secret["UpdateReplacePolicy"] != c.want {
				t.Errorf("DeletionPolicy %v, UpdateReplacePolicy %v, want %s", secret["DeletionPolicy"], secret["UpdateReplacePolicy"], c.want)
			}
		})
	}
}
