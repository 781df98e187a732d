package httpapi_test

// Payload encryption at rest: queues with encryptionEnabled keep only
// ciphertext in the database; every read path opens it; a server without
// the right key says so (503) and neither writes nor leases.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/queen-serverless/queen/core/crypt"
	"github.com/queen-serverless/queen/core/pgstore"
)

const (
	encKey1 = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	encKey2 = "1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100"
	encKey3 = "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
)

// serverWithKeys is another API process on s's database whose store holds
// the key ring ring (nil: no key at all).
func serverWithKeys(t *testing.T, s *server, ring string) *server {
	t.Helper()
	var keys pgstore.KeyLoader
	if ring != "" {
		r, err := crypt.Parse(ring)
		if err != nil {
			t.Fatal(err)
		}
		keys = func(context.Context) (*crypt.Ring, error) { return r, nil }
	}
	cfg := s.storeConfig()
	cfg.Keys = keys
	return s.serving(t, pgstore.New(s.env.Pool, cfg))
}

// storedPayloads are the payload texts and key references the database
// holds for queue, segments first, then dead letters.
func storedPayloads(t *testing.T, s *server, queue string) (payloads, keys []string) {
	t.Helper()
	rows, err := s.env.Pool.Query(context.Background(), `
		SELECT u.p, coalesce(sg.key_id, '') FROM queen.segments sg
		JOIN queen.partitions pt ON pt.num = sg.partition_num JOIN queen.queues q ON q.id = pt.queue_id
		CROSS JOIN LATERAL unnest(queen.seg_all(sg.payload, sg.payloads)) AS u(p)
		WHERE q.name = $1
		UNION ALL
		SELECT payload, coalesce(key_id, '') FROM queen.dlq WHERE queue_name = $1`, queue)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var p, k string
		if err := rows.Scan(&p, &k); err != nil {
			t.Fatal(err)
		}
		payloads, keys = append(payloads, p), append(keys, k)
	}
	return payloads, keys
}

// assertCiphertext fails unless every stored payload of queue is sealed
// under a key whose reference starts with keyRef and shows none of the
// secrets.
func assertCiphertext(t *testing.T, s *server, queue, keyRef string, secrets ...string) {
	t.Helper()
	payloads, keys := storedPayloads(t, s, queue)
	if len(payloads) == 0 {
		t.Fatalf("nothing stored for %s", queue)
	}
	for i, p := range payloads {
		for _, secret := range secrets {
			if strings.Contains(p, secret) {
				t.Fatalf("stored payload %q shows %q in plain text", p, secret)
			}
		}
		raw, err := base64.StdEncoding.DecodeString(p)
		if err != nil || len(raw) < 12+16 {
			t.Fatalf("stored payload %q is not sealed bytes (%v)", p, err)
		}
		for _, secret := range secrets {
			if bytes.Contains(raw, []byte(secret)) {
				t.Fatalf("sealed bytes contain %q", secret)
			}
		}
		if !strings.HasPrefix(keys[i], keyRef) {
			t.Fatalf("stored payload %d names key %q, want %s…", i, keys[i], keyRef)
		}
	}
}

func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return out.String()
}

func TestEncryptedQueueRoundTrip(t *testing.T) {
	t.Parallel()
	base := newServer(t) // its store holds no key
	k1 := serverWithKeys(t, base, "k1:"+encKey1)
	noKey := serverWithKeys(t, base, "")
	wrongKey := serverWithKeys(t, base, "k1:"+encKey3) // the same id, other key material

	// Configure: a server without a key refuses, clearly, and writes nothing.
	r := noKey.do("POST", "/api/v1/configure", `{"queue":"vault","options":{"encryptionEnabled":true}}`)
	if r.status != 503 || !strings.Contains(r.errorText(t), "QUEEN_ENCRYPTION_KEY") {
		t.Fatalf("configure encryptionEnabled without a key: %d %s, want 503 naming QUEEN_ENCRYPTION_KEY", r.status, r.body)
	}
	if n := base.rows("queues"); n != 0 {
		t.Fatalf("refused configure created %d queues", n)
	}
	var conf struct {
		Options map[string]any `json:"options"`
	}
	k1.expect("POST", "/api/v1/configure", `{"queue":"vault","options":{"encryptionEnabled":true}}`, 200).json(t, &conf)
	if conf.Options["encryptionEnabled"] != true {
		t.Fatalf("configure echo: %v", conf.Options)
	}

	// Push: sealed before SQL; the table holds ciphertext only.
	card := `{"card": "4111-1111-1111-1111", "nested": [1, 2.5, null, "é"]}`
	k1.expect("POST", "/api/v1/push", `{"items":[`+
		`{"queue":"vault","partition":"p","payload":`+card+`,"transactionId":"m-1"},`+
		`{"queue":"vault","partition":"p","payload":"a plain string secret","transactionId":"m-2"},`+
		`{"queue":"open","partition":"p","payload":{"public":true}}]}`, 201)
	assertCiphertext(t, base, "vault", "k1.", "4111", "plain string secret")
	if payloads, keys := storedPayloads(t, base, "open"); len(payloads) != 1 || keys[0] != "" || !strings.Contains(payloads[0], `"public"`) {
		t.Fatalf("an unencrypted queue stored %q under %q", payloads, keys)
	}

	// A server without the key, or with other key material under the same
	// id, neither writes nor leases: 503 with a message that says why.
	segments := base.rows("segments")
	if r := noKey.do("POST", "/api/v1/push", `{"items":[{"queue":"vault","partition":"p","payload":1}]}`); r.status != 503 ||
		!strings.Contains(r.errorText(t), "vault") || !strings.Contains(r.errorText(t), "encryption key") {
		t.Fatalf("push without the key: %d %s, want 503 naming the queue and the key", r.status, r.body)
	}
	if n := base.rows("segments"); n != segments {
		t.Fatalf("refused push wrote %d segments", n-segments)
	}
	for name, srv := range map[string]*server{"no key": noKey, "wrong key": wrongKey} {
		r := srv.do("GET", "/api/v1/pop/queue/vault?batch=10", nil)
		if r.status != 503 || !strings.Contains(r.errorText(t), "does not hold") {
			t.Fatalf("pop with %s: %d %s, want 503 saying the server lacks the key", name, r.status, r.body)
		}
		if r := srv.do("GET", "/api/v1/messages?queue=vault", nil); r.status != 503 {
			t.Fatalf("browse with %s: %d %s, want 503", name, r.status, r.body)
		}
	}
	var leased int64
	if err := base.env.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM queen.consumers WHERE lease_id IS NOT NULL OR committed >= 0 OR attempts > 0").Scan(&leased); err != nil {
		t.Fatal(err)
	}
	if leased != 0 {
		t.Fatalf("refused pops leased or moved %d cursors", leased)
	}

	// Browse and pop open the payloads exactly as pushed.
	var page0 struct {
		Messages []struct {
			TransactionID string          `json:"transactionId"`
			Data          json.RawMessage `json:"data"`
		} `json:"messages"`
	}
	k1.expect("GET", "/api/v1/messages?queue=vault", nil, 200).json(t, &page0)
	browsed := page0.Messages
	if len(browsed) != 2 || compactJSON(t, browsed[0].Data) != compactJSON(t, []byte(card)) ||
		string(browsed[1].Data) != `"a plain string secret"` {
		t.Fatalf("browse: %+v", browsed)
	}
	var p popped
	k1.expect("GET", "/api/v1/pop/queue/vault?batch=10", nil, 200).json(t, &p)
	if len(p.Messages) != 2 || compactJSON(t, p.Messages[0].Data) != compactJSON(t, []byte(card)) ||
		string(p.Messages[1].Data) != `"a plain string secret"` || p.Messages[0].RetryCount != 0 {
		t.Fatalf("pop: %+v", p.Messages)
	}

	// Dead-letter the second: the snapshot stays sealed; the DLQ reads open it.
	k1.expect("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []map[string]any{
		{"transactionId": "m-1", "partitionId": p.Messages[0].PartitionID, "status": "completed", "leaseId": p.LeaseID},
		{"transactionId": "m-2", "partitionId": p.Messages[1].PartitionID, "status": "dlq", "leaseId": p.LeaseID, "error": "bad card"},
	}}, 200)
	if n := base.rows("dlq"); n != 1 {
		t.Fatalf("dlq rows %d, want 1", n)
	}
	assertCiphertext(t, base, "vault", "k1.", "4111", "plain string secret")
	var page struct {
		Messages []struct {
			PartitionID   string          `json:"partitionId"`
			TransactionID string          `json:"transactionId"`
			Data          json.RawMessage `json:"data"`
		} `json:"messages"`
	}
	k1.expect("GET", "/api/v1/dlq?queue=vault", nil, 200).json(t, &page)
	if len(page.Messages) != 1 || string(page.Messages[0].Data) != `"a plain string secret"` {
		t.Fatalf("dlq list: %+v", page)
	}
	d := page.Messages[0]
	if r := k1.expect("GET", "/api/v1/messages/"+d.PartitionID+"/"+d.TransactionID, nil, 200); !strings.Contains(string(r.body), `"a plain string secret"`) {
		t.Fatalf("dlq get: %s", r.body)
	}
	if r := noKey.do("GET", "/api/v1/dlq?queue=vault", nil); r.status != 503 {
		t.Fatalf("dlq list without the key: %d %s, want 503", r.status, r.body)
	}
	// The listing of every queue goes on without the key: a plain queue's
	// dead letter is read, the sealed one listed with its data withheld.
	noKey.expect("POST", "/api/v1/push", `{"items":[{"queue":"plain","payload":"open"}]}`, 201)
	var pl popped
	noKey.expect("GET", "/api/v1/pop/queue/plain", nil, 200).json(t, &pl)
	noKey.expect("POST", "/api/v1/ack", map[string]any{"transactionId": pl.Messages[0].TransactionID,
		"partitionId": pl.PartitionID, "status": "dlq", "leaseId": pl.LeaseID}, 200)
	var all struct {
		Total    int `json:"total"`
		Messages []struct {
			Queue           string          `json:"queue"`
			Data            json.RawMessage `json:"data"`
			DataUnavailable string          `json:"dataUnavailable"`
		} `json:"messages"`
	}
	noKey.expect("GET", "/api/v1/dlq", nil, 200).json(t, &all)
	if all.Total != 2 || len(all.Messages) != 2 {
		t.Fatalf("dlq list of every queue without the key: %+v, want both dead letters", all)
	}
	for _, m := range all.Messages {
		switch {
		case m.Queue == "plain" && (string(m.Data) != `"open"` || m.DataUnavailable != ""):
			t.Errorf("plain dead letter: %+v", m)
		case m.Queue == "vault" && (string(m.Data) != "null" || !strings.Contains(m.DataUnavailable, "key")):
			t.Errorf("sealed dead letter without the key: %+v, want data null and why", m)
		}
	}
	noKey.expect("DELETE", "/api/v1/messages/"+pl.PartitionID+"/"+pl.Messages[0].TransactionID, nil, 200)

	// Rotation: k2 is newest. A DLQ retry re-pushes the k1 snapshot as it
	// is; new pushes (this server never saw the queue: it learns that it is
	// encrypted from the database) are sealed with k2; both read back.
	rotated := serverWithKeys(t, base, "k2:"+encKey2+",k1:"+encKey1)
	rotated.expect("POST", "/api/v1/messages/"+d.PartitionID+"/"+d.TransactionID+"/retry", nil, 200)
	rotated.expect("POST", "/api/v1/push", `{"items":[{"queue":"vault","partition":"p","payload":{"card":"5500-0000"},"transactionId":"m-3"}]}`, 201)
	_, keys := storedPayloads(t, base, "vault")
	if last := keys[len(keys)-1]; !strings.HasPrefix(last, "k2.") {
		t.Fatalf("a push after rotation was sealed with %q, want k2", last)
	}
	if r := k1.do("GET", "/api/v1/pop/queue/vault?batch=10", nil); r.status != 503 || !strings.Contains(r.errorText(t), "k2.") {
		t.Fatalf("pop of k2-sealed messages by a k1-only server: %d %s, want 503 naming k2", r.status, r.body)
	}
	rotated.expect("GET", "/api/v1/pop/queue/vault?batch=10", nil, 200).json(t, &p)
	if len(p.Messages) != 2 || string(p.Messages[0].Data) != `"a plain string secret"` ||
		compactJSON(t, p.Messages[1].Data) != `{"card":"5500-0000"}` {
		t.Fatalf("pop after rotation: %+v", p.Messages)
	}

	// A transaction's push into the encrypted queue is sealed too.
	rotated.expect("POST", "/api/v1/transaction", map[string]any{"operations": []map[string]any{
		{"type": "ack", "transactionId": "m-3", "partitionId": p.Messages[1].PartitionID, "status": "completed", "leaseId": p.LeaseID},
		{"type": "push", "items": []map[string]any{{"queue": "vault", "partition": "q", "payload": map[string]any{"pin": "9876"}}}},
	}}, 200)
	assertCiphertext(t, base, "vault", "k", "4111", "plain string secret", "5500", "9876")
	rotated.expect("GET", "/api/v1/pop/queue/vault/partition/q", nil, 200).json(t, &p)
	if len(p.Messages) != 1 || compactJSON(t, p.Messages[0].Data) != `{"pin":"9876"}` {
		t.Fatalf("pop of the transaction's push: %+v", p.Messages)
	}
}
