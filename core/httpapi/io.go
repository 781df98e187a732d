package httpapi

import (
	"io"
	"net/http"
	"strings"
)

func ioCopy(dst *strings.Builder, r *http.Request) (int64, error) {
	if r.Body == nil {
		return 0, nil
	}
	return io.Copy(dst, r.Body)
}
