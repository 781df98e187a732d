package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/queen-serverless/queen/core/egress"
	"github.com/queen-serverless/queen/core/queen"
)

// Subscriptions (docs/subscriptions.md): a (queue, consumer group)
// delivered to a target by the dispatcher.

// subscriptionFields and targetFields are the keys a subscription's
// definition may have: a misspelt option is refused, not defaulted. The
// keys are compared exactly: encoding/json's DisallowUnknownFields would
// take "batchsize" for batchSize.
var (
	subscriptionFields = []string{"queue", "consumerGroup", "target", "batchSize", "maxBatchBytes", "batchWindowMs",
		"maxConcurrency", "enabled"}
	targetFields = []string{"function", "url"}
)

func (a *API) putSubscription(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var req queen.SubscriptionRequest
	if err := decodeBody(body, &req); err != nil {
		return err
	}
	var keys struct {
		Top    map[string]json.RawMessage
		Target map[string]json.RawMessage `json:"target"`
	}
	if err := decodeBody(body, &keys.Top); err != nil {
		return err
	}
	if t, ok := keys.Top["target"]; ok {
		if err := json.Unmarshal(t, &keys.Target); err != nil {
			return queen.Invalid("target", `must be an object: {"function": …} or {"url": …}`)
		}
	}
	for _, set := range []struct {
		prefix string
		got    map[string]json.RawMessage
		known  []string
	}{{"", keys.Top, subscriptionFields}, {"target.", keys.Target, targetFields}} {
		for k := range set.got {
			if !slices.Contains(set.known, k) {
				return queen.Invalid(set.prefix+k, "is not a field of a subscription (%s%s)", set.prefix,
					strings.Join(set.known, ", "+set.prefix))
			}
		}
	}
	if _, err := req.Resolve(); err != nil {
		return err
	}
	if a.cfg.Targets == nil {
		return queen.Invalid("target", "this server delivers no subscriptions")
	}
	if err := a.cfg.Targets.CheckTarget(r.Context(), req.Target); err != nil {
		return err
	}
	s, err := a.store.PutSubscription(r.Context(), req)
	if err != nil {
		return err
	}
	if a.cfg.OnSubscription != nil {
		a.cfg.OnSubscription(r.Context(), s)
	}
	writeJSON(w, http.StatusCreated, a.shown(r, s))
	return nil
}

func (a *API) listSubscriptions(w http.ResponseWriter, r *http.Request) error {
	subs, err := a.store.Subscriptions(r.Context())
	if err != nil {
		return err
	}
	for i := range subs {
		subs[i] = a.shown(r, subs[i])
	}
	writeJSON(w, http.StatusOK, map[string]any{"subscriptions": subs})
	return nil
}

func (a *API) getSubscription(w http.ResponseWriter, r *http.Request) error {
	s, err := a.store.Subscription(r.Context(), r.PathValue("queue"), r.PathValue("consumerGroup"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.shown(r, s))
	return nil
}

func (a *API) deleteSubscription(w http.ResponseWriter, r *http.Request) error {
	queue, group := r.PathValue("queue"), r.PathValue("consumerGroup")
	if err := a.store.DeleteSubscription(r.Context(), queue, group); err != nil {
		return err
	}
	a.gone(r.Context(), queue, group)
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "queue": queue, "consumerGroup": group})
	return nil
}

// gone tells OnSubscriptionsGone that subscriptions were deleted.
func (a *API) gone(ctx context.Context, queue, group string) {
	if a.cfg.OnSubscriptionsGone != nil {
		a.cfg.OnSubscriptionsGone(ctx, queue, group)
	}
}

// shown is s as the caller may see it: to all but admins, a URL target's
// query values (they may be tokens) are redacted, and so is lastError
// (it may quote the URL).
func (a *API) shown(r *http.Request, s queen.Subscription) queen.Subscription {
	if a.cfg.Admin == nil || a.cfg.Admin(r) || s.Target.URL == "" {
		return s
	}
	redacted := egress.Redacted(s.Target.URL)
	if s.LastError != nil {
		e := strings.ReplaceAll(*s.LastError, s.Target.URL, redacted)
		if u, err := url.Parse(s.Target.URL); err == nil && u.RawQuery != "" {
			e = strings.ReplaceAll(e, u.RawQuery, "REDACTED")
		}
		s.LastError = &e
	}
	s.Target.URL = redacted
	return s
}
