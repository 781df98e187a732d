package httpapi_test

import (
	"testing"

	"github.com/queen-serverless/queen/internal/pgstoretest"
)

func TestMain(m *testing.M) { pgstoretest.Main(m) }
