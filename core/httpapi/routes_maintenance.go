package httpapi

import (
	"fmt"
	"net/http"

	"github.com/queen-serverless/queen/core/queen"
)

// MaintenanceRetryAfter is the Retry-After (seconds) of a push refused
// during maintenance.
const MaintenanceRetryAfter = 30

type maintenanceRequest struct {
	Enabled *bool `json:"enabled"`
}

// maintenanceReply is Queen's shape for mode: push (maintenanceMode, with
// popMaintenanceMode on GET) or pop (popMaintenanceMode). Pushes are
// refused rather than buffered, so nothing is ever buffered.
func maintenanceReply(mode queen.MaintenanceMode, st queen.MaintenanceState, get bool) map[string]any {
	if mode == queen.MaintainPop {
		msg := "Pop maintenance mode is off: pops deliver messages."
		if st.Pop {
			msg = "Pop maintenance mode is on: every pop returns nothing (204)."
		}
		return map[string]any{"popMaintenanceMode": st.Pop, "message": msg}
	}
	msg := "Maintenance mode is off: pushes are accepted."
	if st.Push {
		msg = fmt.Sprintf("Maintenance mode is on: pushes are refused with 503 and Retry-After: %d; nothing is buffered.", MaintenanceRetryAfter)
	}
	out := map[string]any{"maintenanceMode": st.Push, "bufferedMessages": 0, "bufferHealthy": true, "message": msg}
	if get {
		out["popMaintenanceMode"] = st.Pop
	}
	return out
}

func (a *API) getMaintenance(mode queen.MaintenanceMode) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		st, err := a.store.Maintenance(r.Context())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, maintenanceReply(mode, st, true))
		return nil
	}
}

func (a *API) setMaintenance(mode queen.MaintenanceMode) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req maintenanceRequest
		if err := decode(r, &req); err != nil {
			return err
		}
		if req.Enabled == nil {
			return queen.Invalid("enabled", "(boolean) is required")
		}
		st, err := a.store.SetMaintenance(r.Context(), mode, *req.Enabled)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, maintenanceReply(mode, st, false))
		return nil
	}
}
