// Package repocheck holds tests of the repository's own shape rather than of
// its behaviour: rules a reviewer would otherwise have to remember, such as
// the size of a source file. It has no code of its own; `go test
// ./internal/repocheck` runs the checks.
package repocheck
