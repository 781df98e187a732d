package pgcluster

import (
	"bufio"
	"errors"
	"io"
	"os"
	"strings"
)

// exists reports whether path exists (a dangling link does).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// isEmptyDir reports whether dir has no entries.
func isEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

// fileSize is the size of path, 0 when it cannot be read.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns the end of a log file from offset on, at most 4 KiB.
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if size := fileSize(path); size-offset > 4096 {
		offset = size - 4096
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}

// readLines returns up to n lines of a file.
func readLines(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for len(lines) < n && s.Scan() {
		lines = append(lines, strings.TrimSpace(s.Text()))
	}
	return lines, s.Err()
}
