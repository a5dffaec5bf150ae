package main

import (
	"strings"
	"testing"
)

// TestLeavesRunning: the floor's start needs every process stopped, so an
// ops list that started them and did not end by stopping them has them
// stopped first.
func TestLeavesRunning(t *testing.T) {
	for _, c := range []struct {
		ops  string
		want bool
	}{
		{"register", false},
		{"register,start", true},
		{"register,start,status", true},
		{"register,start,status,restart", true},
		{"register,start,status,restart,stop", false},
	} {
		if got := leavesRunning(strings.Split(c.ops, ",")); got != c.want {
			t.Errorf("leavesRunning(%s) = %v, want %v", c.ops, got, c.want)
		}
	}
}
