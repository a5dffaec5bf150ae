package policies

import "testing"

func TestPooledConnections(t *testing.T) {
	cases := []struct {
		name      string
		openFiles uint64
		dials     int
		want      int
	}{
		{"unknown limit", 0, 256, minPooled},
		{"a shell's default of 1024", 1024, 256, minPooled},
		{"just above the floor", 1024 + 256 + 300, 256, 300},
		{"exactly the floor", 1024 + 256 + minPooled, 256, minPooled},
		{"a limit of 20,000 holds 10,000 hosts", 20000, 256, 18720},
		{"negative dials count as none", 20000, -5, 18976},
		{"systemd's 524,288 is capped", 524288, 256, maxPooled},
		{"one short of the cap", maxPooled + 1024 + 255, 256, maxPooled - 1},
	}
	for _, c := range cases {
		if got := PooledConnections(c.openFiles, c.dials); got != c.want {
			t.Errorf("%s: PooledConnections(%d, %d) = %d, want %d", c.name, c.openFiles, c.dials, got, c.want)
		}
	}
}
