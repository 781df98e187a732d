package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/queen-serverless/queen/internal/pgtest"
)

// screenshotsEnv names a directory: when set, the browser test writes a
// PNG of each console page there (the README's docs/console/ pictures:
// QUEEN_CONSOLE_SCREENSHOTS=$PWD/docs/console go test -run TestConsoleInBrowser ./cmd/queen).
const screenshotsEnv = "QUEEN_CONSOLE_SCREENSHOTS"

// findChromium returns the path of a Chromium (or Chrome) binary, or "".
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser drives one headless Chromium tab on the console.
type browser struct {
	t    *testing.T
	ctx  context.Context
	shot string // screenshot directory, "" for none
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := findChromium()
	if path == "" {
		t.Skip("no Chromium found (apt-get install chromium; .ci/run installs it): the console's browser tests are skipped")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("lang", "en-US"))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium's sandbox refuses root
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	// The first action starts the browser; it belongs to this context (a
	// shorter-lived one would close it when it ends).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	b := &browser{t: t, ctx: ctx, shot: os.Getenv(screenshotsEnv)}
	if b.shot != "" {
		if err := os.MkdirAll(b.shot, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// do runs steps, each bounded to 20 s.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		html, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('main').innerText`))
		b.t.Fatalf("%s: %v\npage text:\n%s", what, err, html)
	}
}

// eval returns the value of a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// open shows a console page: the hash route changes, as a click on a link.
func (b *browser) open(hash string) {
	b.t.Helper()
	b.do("open "+hash, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, hash)))
}

// waitFor waits until a JavaScript expression is truthy.
func (b *browser) waitFor(what, expr string) {
	b.t.Helper()
	b.do(what, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(15*time.Second)))
}

// waitForWithin is waitFor for conditions that take longer to come: it
// polls for up to limit.
func (b *browser) waitForWithin(what, expr string, limit time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, limit+5*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(limit))); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// cells returns the text of the cells of the first row matching sel.
func (b *browser) cells(sel string) []string {
	b.t.Helper()
	return eval[[]string](b, fmt.Sprintf(`[...document.querySelector(%q).querySelectorAll('td')].map(td => td.textContent)`, sel))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`document.querySelector(%q).innerText`, sel))
}

// screenshot writes the whole page as name.png when screenshots are asked
// for; viewport: only what the window shows (a dialog over the page).
func (b *browser) screenshot(name string, viewport ...bool) {
	b.t.Helper()
	if b.shot == "" {
		return
	}
	// The fonts are loaded first (a picture taken before shows fallback
	// fonts); a passing toast would float over the middle of a whole-page
	// picture.
	b.waitFor("the fonts", `document.fonts.status === 'loaded'`)
	b.do("hide the toast", chromedp.Evaluate[chromedp.Void](`document.querySelector('#flash').hidden = true`))
	shot := chromedp.FullScreenshot(100)
	if len(viewport) > 0 && viewport[0] {
		shot = chromedp.CaptureScreenshot()
	}
	png, err := chromedp.Run(b.ctx, shot)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.shot, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// The console in a real browser against `queen serve` with real data:
// every page renders what the API holds, a dead letter is retried from the
// console and shows up in its partition, a seek moves the cursors, a
// configure changes the options, and errors show as messages.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the browser tests are in the full lane (make test)")
	}
	t.Parallel()
	b := newBrowser(t)
	s := startServe(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "QUEEN_REAPER_INTERVAL": "1s"})
	must := func(method, path, body string, want int) string {
		t.Helper()
		st, out := s.do(method, path, body)
		if st != want {
			t.Fatalf("%s %s: %d %s", method, path, st, out)
		}
		return out
	}
	// orders: cust-1 (3 messages), cust-2 (2), cust-3 (1); emails: 4.
	var items []string
	for i, p := range []string{"cust-1", "cust-1", "cust-1", "cust-2", "cust-2", "cust-3"} {
		items = append(items, fmt.Sprintf(`{"queue":"orders","partition":%q,"transactionId":"order-%d","payload":{"order":%d,"total":%d.5,"lines":[{"sku":"A-%d","qty":%d}]}}`, p, i+1, i+1, 10*(i+1), i, i%3+1))
	}
	for i := range 4 {
		items = append(items, fmt.Sprintf(`{"queue":"emails","payload":{"to":"user%d@example.com","template":"welcome"}}`, i))
	}
	must("POST", "/api/v1/push", `{"items":[`+strings.Join(items, ",")+`]}`, 201)
	type popped struct {
		PartitionID string `json:"partitionId"`
		LeaseID     string `json:"leaseId"`
		Messages    []struct {
			TransactionID string `json:"transactionId"`
		} `json:"messages"`
	}
	pop := func(path string) popped {
		t.Helper()
		var p popped
		if err := json.Unmarshal([]byte(must("GET", path, "", 200)), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// billing dead-letters order-6, completes order-4 and holds a lease on cust-1.
	p := pop("/api/v1/pop/queue/orders/partition/cust-3?batch=1&consumerGroup=billing")
	must("POST", "/api/v1/ack", fmt.Sprintf(`{"transactionId":"order-6","partitionId":%q,"status":"dlq","consumerGroup":"billing","leaseId":%q,"error":"card declined: insufficient funds"}`, p.PartitionID, p.LeaseID), 200)
	p = pop("/api/v1/pop/queue/orders/partition/cust-2?batch=1&consumerGroup=billing")
	must("POST", "/api/v1/ack", fmt.Sprintf(`{"transactionId":"order-4","partitionId":%q,"status":"completed","consumerGroup":"billing","leaseId":%q}`, p.PartitionID, p.LeaseID), 200)
	pop("/api/v1/pop/queue/orders/partition/cust-1?batch=2&consumerGroup=billing")
	pop("/api/v1/pop/queue/emails?batch=2&autoAck=true")

	if b.shot != "" {
		// Traffic for the charts of the pictures.
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(150 * time.Millisecond):
				}
				s.do("POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":"emails","payload":{"to":"load%d@example.com"}},{"queue":"emails","payload":{"n":%d}}]}`, i, i))
				if i%3 > 0 {
					s.do("GET", "/api/v1/pop/queue/emails?batch=2&autoAck=true", "")
				}
			}
		})
		defer func() { close(stop); wg.Wait() }()
	}

	// Overview: one row per queue, with the API's numbers.
	b.do("load the console", chromedp.Navigate(s.base+"/console/"), chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-queue="orders"]`)))
	got := b.cells(`#queues tr[data-queue="orders"]`)
	// name, partitions, messages, depth, pushed/s, groups, worst lag, dead letters
	if len(got) != 8 || got[0] != "orders" || got[1] != "3" || got[2] != "6" || got[5] != "1" || got[6] != "4" || got[7] != "1" {
		t.Errorf("overview row of orders: %q", got)
	}
	if txt := b.text(".cards"); !strings.Contains(txt, "DEAD LETTERS\n1") && !strings.Contains(strings.ToUpper(txt), "DEAD LETTERS\n1") {
		t.Errorf("overview cards: %q", txt)
	}
	// It refreshes by itself: a push shows up within a sampling period.
	must("POST", "/api/v1/push", `{"items":[{"queue":"emails","payload":{"to":"late@example.com"}}]}`, 201)
	b.waitFor("the overview refreshing", `Number(document.querySelector('#queues tr[data-queue="emails"] td:nth-child(3)').textContent.replace(/,/g, '')) >= 5`)
	if b.shot != "" {
		// The charts draw the samples the page takes every 2 s: seven more,
		// about 15 s of the traffic above.
		n := eval[int](b, `samples.length`)
		b.waitForWithin("samples for the charts", fmt.Sprintf(`samples.length >= %d`, n+7), time.Minute)
	}
	b.screenshot("overview")

	// Queue page: per partition and group, cursor, lag, lease and attempts.
	b.open("#/queues/orders")
	b.do("queue page", chromedp.WaitVisible(chromedp.CSS(`#partitions tr[data-partition="cust-1"][data-group="billing"]`)))
	// (partition, last offset, last push on a group's first row) group, cursor, lag, lease, expires, attempts
	got = b.cells(`#partitions tr[data-partition="cust-1"][data-group="billing"]`)
	if len(got) != 9 || got[0] != "cust-1" || got[1] != "2" || got[3] != "billing" || got[4] != "-1" || got[5] != "3" ||
		!strings.HasPrefix(got[6], "leased") || !strings.Contains(got[6], "to 1") || !strings.HasPrefix(got[7], "in ") || !strings.Contains(got[7], "m ") || got[8] != "0" {
		t.Errorf("cust-1 for billing: %q", got)
	}
	got = b.cells(`#partitions tr[data-partition="cust-3"][data-group="billing"]`)
	if got[4] != "0" || got[5] != "0" || got[6] != "—" {
		t.Errorf("cust-3 for billing: %q", got)
	}
	b.screenshot("queue")

	// Seek billing to the end, through the confirmation: every cursor moves
	// to its partition's last offset, in the API and on the page.
	b.do("seek to end", chromedp.Click(chromedp.CSS(`#groups tr[data-group="billing"] button[data-action="seek-end"]`)),
		chromedp.WaitVisible(chromedp.CSS("#modal-ok")))
	if txt := b.text("#modal-body"); !strings.Contains(txt, "billing on orders to the end") {
		t.Errorf("seek confirmation says %q", txt)
	}
	b.screenshot("group-action", true)
	b.do("confirm the seek", chromedp.Click(chromedp.CSS("#modal-ok")), chromedp.WaitNotVisible(chromedp.CSS("#modal")))
	b.waitFor("cursor of cust-1 on the page", `document.querySelector('#partitions tr[data-partition="cust-1"][data-group="billing"] td.cursor').textContent === '2'`)
	var group struct {
		Queues []struct {
			Cursors []struct {
				Partition string `json:"partition"`
				Committed int64  `json:"committed"`
				LeaseID   string `json:"leaseId"`
			} `json:"cursors"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(must("GET", "/api/v1/consumer-groups/billing", "", 200)), &group); err != nil {
		t.Fatal(err)
	}
	for _, c := range group.Queues[0].Cursors {
		want := map[string]int64{"cust-1": 2, "cust-2": 1, "cust-3": 0}[c.Partition]
		if c.Committed != want || c.LeaseID != "" {
			t.Errorf("after the seek, billing on %s: committed %d lease %q, want %d and no lease", c.Partition, c.Committed, c.LeaseID, want)
		}
	}

	// Partition browser: messages by offset, payloads pretty-printed.
	b.open("#/queues/orders/partitions/cust-1?from=0")
	b.do("partition browser", chromedp.WaitVisible(chromedp.CSS(`article.message[data-offset="2"] pre.json`)))
	if txt := b.text(`article.message[data-offset="1"] pre.json`); !strings.Contains(txt, "{\n  \"order\": 2,\n  \"total\": 20.5,") {
		t.Errorf("payload of offset 1:\n%s", txt)
	}
	if txt := b.text(`article.message[data-offset="0"] header`); !strings.Contains(txt, "completed") || !strings.Contains(txt, "order-1") {
		t.Errorf("header of offset 0: %q", txt)
	}
	b.screenshot("partition")

	// Dead letters: the stored error and payload, then a retry that pushes
	// the message again to its partition.
	b.open("#/dlq")
	b.do("dead letters", chromedp.WaitVisible(chromedp.CSS(`#dlq tr[data-transaction="order-6"]`)),
		chromedp.Click(chromedp.CSS(`#dlq tr[data-transaction="order-6"] button[data-action="show"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#dlq tr.detail pre.json`)))
	if txt := b.text(`#dlq tr.detail`); !strings.Contains(txt, "card declined: insufficient funds") || !strings.Contains(txt, `"order": 6`) {
		t.Errorf("dead letter detail: %q", txt)
	}
	b.screenshot("dead-letters")
	// Filters narrow the table (here to another queue: nothing), and clear.
	b.do("filter dead letters", chromedp.SetValue(chromedp.CSS("#filter-queue"), "emails"),
		chromedp.Click(chromedp.CSS(`#dlq-filters button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("#dlq-empty")))
	if hash := eval[string](b, `location.hash`); hash != "#/dlq?queue=emails" {
		t.Errorf("filtered address %q", hash)
	}
	b.open("#/dlq?queue=orders&consumerGroup=billing")
	b.do("filter dead letters by queue and group", chromedp.WaitVisible(chromedp.CSS(`#dlq tr[data-transaction="order-6"]`)))
	b.do("retry", chromedp.Click(chromedp.CSS(`#dlq tr[data-transaction="order-6"] button[data-action="retry"]`)),
		chromedp.WaitVisible(chromedp.CSS("#modal-ok")), chromedp.Click(chromedp.CSS("#modal-ok")),
		chromedp.WaitVisible(chromedp.CSS("#dlq-empty")))
	if out := must("GET", "/api/v1/dlq", "", 200); !strings.Contains(out, `"total":0`) {
		t.Errorf("dead letters after the retry: %s", out)
	}
	if out := must("GET", "/api/v1/messages?queue=orders&partition=cust-3&fromOffset=1", "", 200); !strings.Contains(out, `"offset":1`) || !strings.Contains(out, `"order":6`) {
		t.Errorf("cust-3 after the retry: %s", out)
	}
	b.open("#/queues/orders/partitions/cust-3?from=0")
	b.do("retried message in its partition", chromedp.WaitVisible(chromedp.CSS(`article.message[data-offset="1"]`)))
	if txt := b.text(`article.message[data-offset="1"]`); !strings.Contains(txt, `"order": 6`) || !strings.Contains(txt, "pending") {
		t.Errorf("retried message: %q", txt)
	}

	// Configure: a partial update through the API's validation.
	b.open("#/queues/orders/configure")
	b.do("configure", chromedp.WaitVisible(chromedp.CSS("#opt-retryLimit")), chromedp.SetValue(chromedp.CSS("#opt-retryLimit"), "5"),
		chromedp.Click(chromedp.CSS(`#configure-form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("#configure-result")))
	if out := must("GET", "/api/v1/resources/queues/orders", "", 200); !strings.Contains(out, `"retryLimit":5,`) || !strings.Contains(out, `"leaseTime":300,`) {
		t.Errorf("options after configure: %s", out)
	}
	b.screenshot("configure")
	b.do("configure a bad value", chromedp.SetValue(chromedp.CSS("#opt-retryLimit"), "-1"),
		chromedp.Click(chromedp.CSS(`#configure-form button[type="submit"]`)))
	b.waitFor("the API's 400 as a message", `(document.querySelector('.error-box') || {}).innerText?.includes('options.retryLimit: must be between 0 and 1000')`)

	// Seek to a point in time (before every message: back to the start),
	// then delete the group on this queue.
	b.open("#/queues/orders")
	b.do("seek to a time", chromedp.WaitVisible(chromedp.CSS(`#groups tr[data-group="billing"] button[data-action="seek-time"]`)),
		chromedp.Click(chromedp.CSS(`#groups tr[data-group="billing"] button[data-action="seek-time"]`)),
		chromedp.WaitVisible(chromedp.CSS("#seek-time")), chromedp.SetValue(chromedp.CSS("#seek-time"), "2000-01-01T00:00"),
		chromedp.Click(chromedp.CSS("#modal-ok")), chromedp.WaitNotVisible(chromedp.CSS("#modal")))
	b.waitFor("cursor of cust-1 back at the start", `document.querySelector('#partitions tr[data-partition="cust-1"][data-group="billing"] td.cursor').textContent === '-1'`)
	b.do("delete the group", chromedp.Click(chromedp.CSS(`#groups tr[data-group="billing"] button[data-action="delete-group"]`)),
		chromedp.WaitVisible(chromedp.CSS("#modal-ok")), chromedp.Click(chromedp.CSS("#modal-ok")), chromedp.WaitNotVisible(chromedp.CSS("#modal")))
	b.waitFor("no group left on the page", `(document.querySelector('main .empty') || {}).textContent === 'No consumer group has read this queue yet.'`)
	if st, out := s.do("GET", "/api/v1/consumer-groups/billing", ""); st != 404 {
		t.Errorf("billing after its deletion: %d %s", st, out)
	}

	// Errors show as messages, never as a blank page.
	b.open("#/queues/nope")
	b.waitFor("the 404 as a message", `(document.querySelector('.error-box') || {}).innerText?.includes('HTTP 404: queue nope not found')`)
	b.screenshot("error")
	b.open("#/queues/orders/partitions/cust-9")
	b.waitFor("an unknown partition as a message", `(document.querySelector('.error-box') || {}).innerText?.includes('queue orders has no partition cust-9')`)
	b.open("#/nowhere")
	b.waitFor("an unknown page as a message", `(document.querySelector('.error-box') || {}).innerText?.includes('there is no page at #/nowhere')`)
	b.noScriptErrors()
}

// noScriptErrors fails the test if the page had a script error or a
// content-security-policy violation.
func (b *browser) noScriptErrors() {
	b.t.Helper()
	if errs := eval[[]string](b, `window.queenConsoleErrors`); len(errs) > 0 {
		b.t.Errorf("script errors on the page: %q", errs)
	}
}

// With authentication: on `queen serve` with JWTs the console says that a
// token is needed and works once one is given; through `queen console`
// (bearer) the proxy authenticates, and the browser's own calls — reads and
// a POST, which carries an Origin — pass its checks.
func TestConsoleInBrowserWithAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the browser tests are in the full lane (make test)")
	}
	t.Parallel()
	b := newBrowser(t)
	s := startServe(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "QUEEN_JWT_SECRET": testSecret})
	admin := token(t, "ops", "admin")
	if st, out := s.doAs(admin, "POST", "/api/v1/push", `{"items":[{"queue":"secure","payload":{"n":1}}]}`); st != 201 {
		t.Fatalf("push: %d %s", st, out)
	}

	b.do("load the console", chromedp.Navigate(s.base+"/console/"))
	b.waitFor("the 401 as a message with a hint", `(document.querySelector('.error-box') || {}).innerText?.includes('HTTP 401: authentication required') &&
		document.querySelector('.error-box').innerText.includes('Token button')`)
	b.do("enter a token", chromedp.Click(chromedp.CSS("#token-button")), chromedp.WaitVisible(chromedp.CSS("#token-input")),
		chromedp.SetValue(chromedp.CSS("#token-input"), admin), chromedp.Click(chromedp.CSS("#modal-ok")),
		chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-queue="secure"]`)))

	c := startConsole(t, map[string]string{}, nil, "-api", s.base, "-token", admin)
	b.do("load the console through queen console", chromedp.Evaluate[chromedp.Void](`localStorage.clear()`),
		chromedp.Navigate(c.base+"/console/"), chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-queue="secure"]`)))
	if txt := b.text("#api-info"); txt != "API "+s.base+" (bearer)" {
		t.Errorf("header says %q", txt)
	}
	b.do("create a queue", chromedp.SetValue(chromedp.CSS("#new-queue"), "made-in-console"),
		chromedp.Click(chromedp.CSS(`#create-queue button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("#opt-leaseTime")))
	if st, out := s.doAs(admin, "GET", "/api/v1/resources/queues/made-in-console", ""); st != 200 {
		t.Errorf("queue created through the proxy: %d %s", st, out)
	}
	b.noScriptErrors()
}
