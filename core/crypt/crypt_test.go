package crypt_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/queen-serverless/queen/core/crypt"
)

const (
	hexKey1 = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	hexKey2 = "1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100"
)

func TestSealOpenAndRotation(t *testing.T) {
	old, err := crypt.Parse("k1:" + hexKey1)
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte(`{"card":"4111 1111 1111 1111"}`)
	id, sealed, err := old.Seal(plain, "orders/eu")
	if err != nil || !strings.HasPrefix(id, "k1.") {
		t.Fatalf("seal: %q %v, want a reference to key k1", id, err)
	}
	if bytes.Contains(sealed, plain) || bytes.Contains(sealed, []byte("4111")) {
		t.Fatal("sealed bytes contain the plaintext")
	}
	// Rotation: k2 is newest; what k1 sealed still opens.
	ring, err := crypt.Parse("k2:" + hexKey2 + ", k1:" + hexKey1)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ring.Open(id, sealed, "orders/eu"); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open after rotation: %q %v", got, err)
	}
	if id, _, _ := ring.Seal(plain, "orders/eu"); !strings.HasPrefix(id, "k2.") {
		t.Fatalf("new payloads sealed with %q, want the newest key k2", id)
	}
	if refs := ring.Refs(); len(refs) != 2 || refs[1] != id || !ring.Holds(id) {
		t.Fatalf("refs %q, want k2's then %q", refs, id)
	}
	// Bound to its queue and partition, and tamper-evident.
	if _, err := ring.Open(id, sealed, "orders/us"); err == nil {
		t.Error("a payload opened for another partition")
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := ring.Open(id, sealed, "orders/eu"); err == nil {
		t.Error("a tampered payload opened")
	}
	// A key the ring lost is a clear error.
	k2only, _ := crypt.Parse("k2:" + hexKey2)
	if _, err := k2only.Open(id, sealed, "orders/eu"); !errors.Is(err, crypt.ErrNoKey) || !strings.Contains(err.Error(), id) {
		t.Errorf("missing key: %v", err)
	}
	// The same id with other key material is another key: its reference
	// differs, so a server can tell it lacks the key before opening.
	other, _ := crypt.Parse("k1:" + hexKey2)
	if other.Holds(id) {
		t.Errorf("key k1 with other material holds %q", id)
	}
	if _, err := other.Open(id, sealed, "orders/eu"); !errors.Is(err, crypt.ErrNoKey) {
		t.Errorf("wrong key material under the same id: %v, want ErrNoKey", err)
	}
	// Two seals of one plaintext differ (fresh nonces).
	_, a, _ := ring.Seal(plain, "x")
	_, b, _ := ring.Seal(plain, "x")
	if bytes.Equal(a, b) {
		t.Error("two seals are identical")
	}
}

func TestParseErrors(t *testing.T) {
	for in, says := range map[string]string{
		"":                                    "empty",
		"not a key!":                          "neither hex nor base64",
		"abcd":                                "2 bytes in hex",
		"k1:" + hexKey1[:62]:                  "31 bytes",
		"k1:" + hexKey1 + "," + hexKey2:       "want id:key",
		"k1:" + hexKey1 + ",k1:" + hexKey2:    "given twice",
		"k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYX": "24 bytes in base64",
	} {
		_, err := crypt.Parse(in)
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("Parse(%.20q…): %v, want an error saying %q", in, err, says)
		}
		if err != nil && len(in) > 10 && strings.Contains(err.Error(), in[3:]) {
			t.Errorf("error echoes key material: %v", err)
		}
	}
	if r, err := crypt.Parse(hexKey1); err != nil || r.Current() != "k1" {
		t.Errorf("bare key: %v", err)
	}
}

func TestLoadOrCreate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data", "encryption.key")
	r1, created, err := crypt.LoadOrCreate(file)
	if err != nil || !created {
		t.Fatalf("first start: created=%v %v", created, err)
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v %v, want 0600", st.Mode().Perm(), err)
	}
	id, sealed, _ := r1.Seal([]byte("hello"), "q/p")
	r2, created, err := crypt.LoadOrCreate(file)
	if err != nil || created {
		t.Fatalf("second start: created=%v %v", created, err)
	}
	if got, err := r2.Open(id, sealed, "q/p"); err != nil || string(got) != "hello" {
		t.Fatalf("the key did not survive a restart: %q %v", got, err)
	}
}
