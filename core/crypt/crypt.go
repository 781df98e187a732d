// Package crypt seals message payloads of encrypted queues with AES-256-GCM
// (the standard library's crypto/aes and crypto/cipher) under a key ring:
// new payloads are sealed with the newest key, and every key of the ring
// opens what it sealed, so keys rotate without rewriting stored rows.
//
// Key material comes as QUEEN_ENCRYPTION_KEY: one or more "id:key" entries
// separated by commas, newest first, each key 32 bytes in hex (64 digits) or
// base64; a bare key (no id) is the ring's only key, id "k1".
//
//	QUEEN_ENCRYPTION_KEY=k2:9f86d0…,k1:2c26b4…
//
// A sealed payload is the nonce (12 bytes) followed by the ciphertext and
// the GCM tag. It travels with the reference of the key that sealed it
// (in its own column): the key's id and a fingerprint of the key, "k2.3f9a0c1e5b7d",
// so a server can tell before it delivers anything whether it holds that
// very key — the same id with other key material is a different key. The
// additional data binds the sealed bytes to the key reference and to what
// the caller says they belong to (queue and partition), so a ciphertext
// copied elsewhere does not open.
package crypt

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the AES-256 key length in bytes.
const KeySize = 32

// ErrNoKey: a payload names a key the ring does not hold, or no ring was
// configured for an encrypted queue.
var ErrNoKey = errors.New("encryption key not available")

// Ring holds the keys, newest first.
type Ring struct {
	ids   []string               // as configured, newest first
	refs  []string               // the ids' references, same order
	aeads map[string]cipher.AEAD // by reference
}

// Parse reads QUEEN_ENCRYPTION_KEY's form. Errors say which entry is wrong
// and never echo key material.
func Parse(s string) (*Ring, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("encryption key: empty")
	}
	r := &Ring{aeads: map[string]cipher.AEAD{}}
	seen := map[string]bool{}
	entries := strings.Split(s, ",")
	for i, e := range entries {
		e = strings.TrimSpace(e)
		id, key, ok := strings.Cut(e, ":")
		if !ok {
			if len(entries) > 1 {
				return nil, fmt.Errorf("encryption key entry %d: want id:key when several keys are given", i+1)
			}
			id, key = "k1", e
		}
		if id == "" || strings.ContainsAny(id, " \t") {
			return nil, fmt.Errorf("encryption key entry %d: empty or blank key id", i+1)
		}
		if seen[id] {
			return nil, fmt.Errorf("encryption key entry %d: key id %q given twice", i+1, id)
		}
		seen[id] = true
		raw, err := decodeKey(key)
		if err != nil {
			return nil, fmt.Errorf("encryption key %q: %w", id, err)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("encryption key %q: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("encryption key %q: %w", id, err)
		}
		ref := reference(id, raw)
		r.ids = append(r.ids, id)
		r.refs = append(r.refs, ref)
		r.aeads[ref] = aead
	}
	return r, nil
}

func decodeKey(s string) ([]byte, error) {
	if b, err := hex.DecodeString(s); err == nil {
		if len(b) != KeySize {
			return nil, fmt.Errorf("is %d bytes in hex, want %d", len(b), KeySize)
		}
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("is %d bytes in base64, want %d", len(b), KeySize)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("is neither hex nor base64 of %d bytes", KeySize)
}

// reference names a key by its id and a fingerprint of the key material:
// the first 6 bytes of SHA-256 over a fixed label and the key, which tell
// keys apart and reveal nothing usable about a 256-bit random key.
func reference(id string, key []byte) string {
	sum := sha256.Sum256(append([]byte("queen key fingerprint\x00"), key...))
	return id + "." + hex.EncodeToString(sum[:6])
}

// Current is the id new payloads are sealed with.
func (r *Ring) Current() string { return r.ids[0] }

// Refs are the references of the ring's keys, newest first: what a stored
// payload's key reference must be one of for this ring to open it.
func (r *Ring) Refs() []string { return append([]string(nil), r.refs...) }

// Holds reports whether ref names a key of the ring.
func (r *Ring) Holds(ref string) bool { _, ok := r.aeads[ref]; return ok }

// Seal encrypts plaintext with the newest key, bound to context (for
// example queue + "\x00" + partition). It returns the key's reference
// and the sealed bytes.
func (r *Ring) Seal(plaintext []byte, context string) (string, []byte, error) {
	ref := r.refs[0]
	aead := r.aeads[ref]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, fmt.Errorf("encryption: nonce: %w", err)
	}
	return ref, aead.Seal(nonce, nonce, plaintext, additional(ref, context)), nil
}

// Open decrypts what Seal returned under the key reference ref for the
// same context.
func (r *Ring) Open(ref string, sealed []byte, context string) ([]byte, error) {
	aead, ok := r.aeads[ref]
	if !ok {
		return nil, fmt.Errorf("%w: the payload was sealed with key %s, which this server's key ring does not hold", ErrNoKey, ref)
	}
	n := aead.NonceSize()
	if len(sealed) < n+aead.Overhead() {
		return nil, errors.New("encryption: sealed payload too short")
	}
	out, err := aead.Open(nil, sealed[:n], sealed[n:], additional(ref, context))
	if err != nil {
		return nil, fmt.Errorf("encryption: payload does not open with key %s (tampered, or sealed for another queue or partition)", ref)
	}
	return out, nil
}

func additional(ref, context string) []byte { return []byte("queen/v1\x00" + ref + "\x00" + context) }

// NewKey returns a fresh random key in hex.
func NewKey() (string, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// LoadOrCreate reads the key ring kept in file (mode 0600), creating the
// file with one fresh key when it does not exist; created reports that. It
// is how `queen serve` works out of the box without QUEEN_ENCRYPTION_KEY.
func LoadOrCreate(file string) (ring *Ring, created bool, err error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		key, err := NewKey()
		if err != nil {
			return nil, false, err
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return nil, false, err
		}
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, false, err
		}
		if _, err := f.WriteString("k1:" + key + "\n"); err != nil {
			f.Close()
			return nil, false, err
		}
		if err := f.Close(); err != nil {
			return nil, false, err
		}
		b, created = []byte("k1:"+key), true
	} else if err != nil {
		return nil, false, err
	}
	ring, err = Parse(string(b))
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", file, err)
	}
	return ring, created, nil
}
