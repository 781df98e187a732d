package httpapi

import "net/http"

// health reports whether the store answers: 200 when it does, 503 when not.
func (a *API) health(w http.ResponseWriter, r *http.Request) error {
	if err := a.store.Ping(r.Context()); err != nil {
		a.cfg.Logger.WarnContext(r.Context(), "health check failed", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unhealthy", "database": "disconnected"})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "healthy", "database": "connected"})
	return nil
}
