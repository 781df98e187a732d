package pgstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/queen-serverless/queen/core/crypt"
	"github.com/queen-serverless/queen/core/queen"
)

// Payload encryption at rest (queues with encryptionEnabled).
//
// The store seals a payload with AES-256-GCM before it reaches SQL and
// opens it after it comes back, so the database only ever holds ciphertext
// for such queues. The SQL side keeps two rules:
//   - a push never stores a plain payload in an encrypted queue: it raises
//     QNENC naming the queue, and the store seals and sends again (it
//     remembers which queues are encrypted, so that costs one extra round
//     trip per queue per EncryptedQueueTTL, not one per push);
//   - a pop never leases a sealed message under a key the caller does not
//     hold: it raises QNKEY naming the key, before anything is leased, and
//     the store loads its key ring (first use) and pops again, or reports
//     that it lacks the key.
//
// A sealed payload is bound to its queue and partition names, so a dead
// letter's sealed snapshot is re-pushed to the same place as it is.

// EncryptedQueueTTL is how long the store remembers that a queue is
// encrypted: within it, its pushes are sealed at once; after it, the next
// push learns again (a queue whose encryption was switched off gets plain
// payloads from then on).
const EncryptedQueueTTL = time.Minute

// KeyLoader returns the key ring for encrypted queues. The store calls it
// the first time an encrypted queue needs a key and keeps what it returns;
// an error is not kept (the next use tries again).
type KeyLoader func(context.Context) (*crypt.Ring, error)

// sealing is the store's encryption state.
type sealing struct {
	load KeyLoader

	mu        sync.Mutex
	ring      *crypt.Ring
	encrypted map[string]time.Time // queue name → remembered until
}

// errNoKeyConfigured is what an encrypted queue meets on a server without keys.
var errNoKeyConfigured = queen.Errorf(queen.ErrKeyUnavailable,
	"this server has no encryption key: set QUEEN_ENCRYPTION_KEY (on AWS the stack sets QUEEN_ENCRYPTION_KEY_SECRET_ARN)")

// loaded returns the key ring if it was loaded already, without loading it.
func (s *Store) loadedRing() *crypt.Ring {
	s.seal.mu.Lock()
	defer s.seal.mu.Unlock()
	return s.seal.ring
}

// keyRing returns the key ring, loading it on first use.
func (s *Store) keyRing(ctx context.Context) (*crypt.Ring, error) {
	if r := s.loadedRing(); r != nil {
		return r, nil
	}
	if s.seal.load == nil {
		return nil, errNoKeyConfigured
	}
	r, err := s.seal.load(ctx)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "encryption key could not be loaded", "err", err)
		return nil, queen.Errorf(queen.ErrKeyUnavailable, "the encryption key could not be loaded (the server log says why)")
	}
	s.seal.mu.Lock()
	defer s.seal.mu.Unlock()
	if s.seal.ring == nil {
		s.seal.ring = r
	}
	return s.seal.ring, nil
}

// remember records whether queue is encrypted.
func (s *Store) remember(queue string, encrypted bool) {
	s.seal.mu.Lock()
	defer s.seal.mu.Unlock()
	if !encrypted {
		delete(s.seal.encrypted, queue)
		return
	}
	if s.seal.encrypted == nil {
		s.seal.encrypted = map[string]time.Time{}
	}
	s.seal.encrypted[queue] = time.Now().Add(EncryptedQueueTTL)
}

func (s *Store) isEncrypted(queue string) bool {
	s.seal.mu.Lock()
	defer s.seal.mu.Unlock()
	until, ok := s.seal.encrypted[queue]
	if ok && time.Now().After(until) {
		delete(s.seal.encrypted, queue)
		return false
	}
	return ok
}

// sealContext is what a sealed payload is bound to: its queue and
// partition (names hold no NUL, so the pair is unambiguous).
func sealContext(queue, partition string) string { return queue + "\x00" + partition }

// pushArg is one push item as the push routine reads it: the domain's
// item, with the payload sealed (KeyID set, Payload a JSON string of the
// base64 ciphertext) when its queue is encrypted.
type pushArg struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	TransactionID string          `json:"transactionId,omitempty"` // none: the routine generates one
	TraceID       string          `json:"traceId,omitempty"`
	ProducerSub   string          `json:"producerSub,omitempty"`
	KeyID         string          `json:"keyId,omitempty"`
}

// pushArgs turns normalized push items into the routine's argument,
// sealing the payloads of the queues known to be encrypted.
func (s *Store) pushArgs(ctx context.Context, items []queen.PushItem) ([]pushArg, error) {
	out := make([]pushArg, len(items))
	for i, it := range items {
		out[i] = pushArg{Queue: it.Queue, Partition: it.Partition, Payload: it.Payload,
			TransactionID: it.TransactionID, TraceID: it.TraceID, ProducerSub: it.ProducerSub}
		if !s.isEncrypted(it.Queue) {
			continue
		}
		ring, err := s.keyRing(ctx)
		if err != nil {
			return nil, fmt.Errorf("queue %s is encrypted: %w", it.Queue, err)
		}
		ref, sealed, err := ring.Seal(it.Payload, sealContext(it.Queue, it.Partition))
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(base64.StdEncoding.EncodeToString(sealed))
		out[i].Payload, out[i].KeyID = b, ref
	}
	return out, nil
}

// sealRequired is the push routine's refusal of a plain payload for an
// encrypted queue.
type sealRequired struct{ queue string }

func (e *sealRequired) Error() string {
	return "queue " + e.queue + " is encrypted: its payloads must be sealed"
}

// keyMissing is the pop routine's refusal to lease messages sealed under a
// key the caller did not name.
type keyMissing struct{ ref, message string }

func (e *keyMissing) Error() string { return e.message }

// Unwrap makes errors.Is(err, queen.ErrKeyUnavailable) true.
func (e *keyMissing) Unwrap() error { return queen.ErrKeyUnavailable }

// sealedCall runs a statement that pushes items (push, transaction): it
// seals what belongs to known encrypted queues, and when the database
// names another encrypted queue, remembers it and runs again.
func (s *Store) sealedCall(ctx context.Context, items []queen.PushItem, run func(args []pushArg) error) error {
	for range len(items) + 1 { // each retry learns one more queue
		args, err := s.pushArgs(ctx, items)
		if err != nil {
			return err
		}
		err = run(args)
		var need *sealRequired
		if !errors.As(err, &need) {
			return err
		}
		if s.isEncrypted(need.queue) { // sealed, and refused anyway: a bug
			return fmt.Errorf("push: %w", err)
		}
		s.remember(need.queue, true)
	}
	return errors.New("push: encrypted queues not learned")
}

// sealedMessage is a message as the routines render it: keyId names the
// key that sealed data (then a JSON string of base64), empty when plain.
type sealedMessage struct {
	queen.Message
	KeyID string `json:"keyId"`
}

// openPayload opens a sealed payload rendered as a JSON string of base64.
func (s *Store) openPayload(ctx context.Context, ref string, data json.RawMessage, queue, partition string) (json.RawMessage, error) {
	ring, err := s.keyRing(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", queue, err)
	}
	if !ring.Holds(ref) {
		return nil, queen.Errorf(queen.ErrKeyUnavailable,
			"queue %s, partition %s: messages are sealed with key %s, which this server does not hold", queue, partition, ref)
	}
	var text string
	if err := json.Unmarshal(data, &text); err != nil {
		return nil, fmt.Errorf("queue %s: sealed payload: %w", queue, err)
	}
	sealed, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("queue %s: sealed payload: %w", queue, err)
	}
	plain, err := ring.Open(ref, sealed, sealContext(queue, partition))
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "sealed payload does not open", "queue", queue, "partition", partition, "err", err)
		return nil, queen.Errorf(queen.ErrKeyUnavailable,
			"queue %s, partition %s: a sealed payload does not open with key %s (tampered with, or the key material changed)",
			queue, partition, ref)
	}
	return plain, nil
}

// openInto replaces *data, sealed under key ref, with the plain payload;
// a plain one (ref "") is left as it is.
func (s *Store) openInto(ctx context.Context, ref string, data *json.RawMessage, queue, partition string) error {
	if ref == "" {
		return nil
	}
	plain, err := s.openPayload(ctx, ref, *data, queue, partition)
	*data = plain
	return err
}

// openMessages returns the domain messages, sealed payloads opened.
func (s *Store) openMessages(ctx context.Context, in []sealedMessage) ([]queen.Message, error) {
	out := make([]queen.Message, len(in))
	for i, m := range in {
		out[i] = m.Message
		if err := s.openInto(ctx, m.KeyID, &out[i].Data, m.Queue, m.Partition); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sealedDeadLetter is a dead letter as the routines render it (see
// sealedMessage).
type sealedDeadLetter struct {
	queen.DeadLetter
	KeyID string `json:"keyId"`
}

// openDeadLetters returns the domain dead letters, sealed payloads opened.
// With keepUnopened (a listing of every queue) a payload sealed under a key
// this server lacks is left out (Data null, DataUnavailable says why)
// instead of failing the whole listing: one queue's missing key must not
// hide every other queue's dead letters.
func (s *Store) openDeadLetters(ctx context.Context, in []sealedDeadLetter, keepUnopened bool) ([]queen.DeadLetter, error) {
	out := make([]queen.DeadLetter, len(in))
	for i, d := range in {
		out[i] = d.DeadLetter
		if err := s.openInto(ctx, d.KeyID, &out[i].Data, d.Queue, d.Partition); err != nil {
			if !keepUnopened || !errors.Is(err, queen.ErrKeyUnavailable) {
				return nil, err
			}
			out[i].Data, out[i].DataUnavailable = nil, err.Error()
		}
	}
	return out, nil
}

// keyRefs are the references of the keys the store holds now (none until
// an encrypted queue needed them).
func (s *Store) keyRefs() []string {
	if r := s.loadedRing(); r != nil {
		return r.Refs()
	}
	return nil
}
